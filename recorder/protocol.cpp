#include "recorder/protocol.h"

#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/variant.hpp>
#include <cereal/types/vector.hpp>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "runtime/error.h"

namespace cprr {
namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

template <class T>
std::string to_bytes(const T& value) {
  std::ostringstream os(std::ios::binary);
  {
    cereal::PortableBinaryOutputArchive ar(os);
    ar(value);
  }
  return std::move(os).str();
}

// Any decoding failure (cereal's "failed to read N bytes", a bad variant index, an absurd
// length that fails to allocate) becomes a ProtocolError naming the message and frame size.
template <class T>
T from_bytes(std::string_view payload, const char* what) {
  try {
    std::istringstream is(std::string(payload), std::ios::binary);
    cereal::PortableBinaryInputArchive ar(is);
    T value;
    ar(value);
    CPRR_CHECK(is.peek() == std::char_traits<char>::eof(), "{} frame has {} trailing bytes", what,
               payload.size() - static_cast<std::size_t>(is.tellg()));
    return value;
  } catch (const ProtocolError&) {
    throw;
  } catch (const std::exception& e) {
    CPRR_THROW_AS(ProtocolError, "malformed {} frame ({} bytes): {}", what, payload.size(),
                  e.what());
  }
}

}  // namespace

std::string encode_hello(const Hello& hello) {
  std::string out;
  put_u32(out, kProtocolMagic);
  put_u32(out, kProtocolVersion);
  out += to_bytes(hello);
  return out;
}

Hello decode_hello(std::string_view payload) {
  if (payload.size() < 8) {
    CPRR_THROW_AS(ProtocolError, "hello frame too short ({} bytes): is --worker a cprr worker?",
                  payload.size());
  }
  const uint32_t magic = get_u32(payload);
  const uint32_t version = get_u32(payload.substr(4));
  if (magic != kProtocolMagic) {
    CPRR_THROW_AS(ProtocolError, "hello has magic {:#010x}, expected {:#010x}: is --worker a cprr worker?",
                  magic, kProtocolMagic);
  }
  if (version != kProtocolVersion) {
    CPRR_THROW_AS(ProtocolError,
                  "worker speaks protocol version {}, this controller speaks {}: rebuild the worker "
                  "against this cprr",
                  version, kProtocolVersion);
  }
  return from_bytes<Hello>(payload.substr(8), "hello");
}

std::string encode(const ToRank& msg) { return to_bytes(msg); }
std::string encode(const FromRank& msg) { return to_bytes(msg); }
ToRank decode_to_rank(std::string_view payload) { return from_bytes<ToRank>(payload, "controller"); }
FromRank decode_from_rank(std::string_view payload) { return from_bytes<FromRank>(payload, "rank"); }

void write_frame(int fd, std::string_view payload) {
  CPRR_CHECK(payload.size() <= kMaxFrameBytes, "refusing to send a {}-byte frame (limit {})",
             payload.size(), kMaxFrameBytes);
  std::string frame;
  frame.reserve(4 + payload.size());
  put_u32(frame, static_cast<uint32_t>(payload.size()));
  frame.append(payload);
  std::size_t done = 0;
  while (done < frame.size()) {
    const ssize_t n = ::write(fd, frame.data() + done, frame.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {  // non-blocking peer socket: wait until writable
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    if (n < 0) throw_errno(__FILE__, __LINE__, "write(control frame)");
    done += static_cast<std::size_t>(n);
  }
}

FrameReader::Fill FrameReader::fill(int fd) {
  if (consumed_ > 0 && consumed_ == buf_.size()) {
    buf_.clear();
    consumed_ = 0;
  }
  char tmp[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n > 0) {
      buf_.append(tmp, static_cast<std::size_t>(n));
      return Fill::data;
    }
    if (n == 0) return Fill::eof;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return Fill::would_block;
    if (errno == ECONNRESET) return Fill::eof;
    throw_errno(__FILE__, __LINE__, "read(control frame)");
  }
}

std::optional<std::string> FrameReader::next() {
  const std::string_view rest = std::string_view(buf_).substr(consumed_);
  if (rest.size() < 4) return std::nullopt;
  const uint32_t len = get_u32(rest);
  if (len > kMaxFrameBytes) {
    CPRR_THROW_AS(ProtocolError, "frame length {} exceeds the limit of {} bytes", len,
                  kMaxFrameBytes);
  }
  if (rest.size() < 4 + static_cast<std::size_t>(len)) return std::nullopt;
  std::string frame(rest.substr(4, len));
  consumed_ += 4 + len;
  if (consumed_ == buf_.size()) {
    buf_.clear();
    consumed_ = 0;
  }
  return frame;
}

std::optional<std::string> read_frame(int fd, FrameReader& reader) {
  for (;;) {
    if (auto frame = reader.next()) return frame;
    const FrameReader::Fill r = reader.fill(fd);
    if (r == FrameReader::Fill::eof) {
      if (reader.mid_frame()) CPRR_THROW_AS(ProtocolError, "control channel closed inside a frame");
      return std::nullopt;
    }
  }
}

}  // namespace cprr

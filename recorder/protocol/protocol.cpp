#include "recorder/protocol/protocol.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/variant.hpp>
#include <cereal/types/vector.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <istream>
#include <ostream>
#include <streambuf>
#include <string>

#include "runtime/error.h"

namespace cprr {
namespace {

/// The input archive of every decode below. It remembers its stream so that a length field can
/// be checked against the bytes left in the frame (see the cereal overloads after it).
class FrameInputArchive final : public cereal::PortableBinaryInputArchive {
 public:
  explicit FrameInputArchive(std::istream& is) : PortableBinaryInputArchive(is), stream_(is) {}
  std::streamsize bytes_left() const { return stream_.rdbuf()->in_avail(); }

 private:
  std::istream& stream_;
};

}  // namespace
}  // namespace cprr

// Hardening of cereal's PortableBinary loading against corrupt frames. Both are non-template
// overloads, so they win over cereal's templates; they are found by argument-dependent lookup and
// affect only this file, the project's only user of PortableBinaryInputArchive (another file
// decoding PortableBinary would instantiate the same cereal templates without them: keep all
// decoding here).
namespace cereal {

// Every string, vector and map starts with a uint64 element count, and cereal resizes the
// container before reading any element. Each element of every protocol message takes at least
// one byte, so a count above the bytes left in the frame is corrupt: refuse it before resizing
// (otherwise a 20-byte frame can ask for a 2^40-byte string or 10^9 default-constructed structs).
static void serialize(PortableBinaryInputArchive& ar, SizeTag<size_type&>& tag) {
  ar(tag.size);
  const auto* frame = dynamic_cast<const cprr::FrameInputArchive*>(&ar);
  if (frame != nullptr && tag.size > static_cast<uint64_t>(frame->bytes_left())) {
    throw Exception("length field " + std::to_string(tag.size) + " exceeds the " +
                    std::to_string(frame->bytes_left()) + " bytes left in the frame");
  }
}

// cereal copies a bool's byte as is, and a bool holding 2 is undefined behaviour once read.
static void load(PortableBinaryInputArchive& ar, bool& value) {
  uint8_t byte = 0;
  ar(byte);
  if (byte > 1) throw Exception("bool field holds " + std::to_string(byte));
  value = byte != 0;
}

}  // namespace cereal

namespace cprr {
namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

/// An output stream buffer appending to a string the caller owns, so that a buffer reused across
/// frames keeps its capacity: encoding through a fresh std::ostringstream grew a new buffer for
/// every frame, which cost several times the encoding itself for a CaseDone of 100+ KiB.
class StringSink final : public std::streambuf {
 public:
  explicit StringSink(std::string& out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* data, std::streamsize n) override {
    out_.append(data, static_cast<std::size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof()))
      out_.push_back(traits_type::to_char_type(c));
    return traits_type::not_eof(c);
  }

 private:
  std::string& out_;
};

/// A read-only stream buffer over bytes owned elsewhere: a frame is decoded in place instead of
/// being copied into an std::istringstream first. Only the position query (tellg) is seekable.
class ViewSource final : public std::streambuf {
 public:
  explicit ViewSource(std::string_view bytes) {
    char* begin = const_cast<char*>(bytes.data());  // read only: no put area, no putback
    setg(begin, begin, begin + bytes.size());
  }

 protected:
  pos_type seekoff(off_type off, std::ios_base::seekdir dir,
                   std::ios_base::openmode which) override {
    if (off != 0 || dir != std::ios_base::cur || (which & std::ios_base::in) == 0) {
      return pos_type(off_type(-1));
    }
    return pos_type(gptr() - eback());
  }
};

// Appends the PortableBinary encoding of `value` to `out`.
template <class T>
void append_bytes(const T& value, std::string& out) {
  StringSink sink(out);
  std::ostream os(&sink);
  cereal::PortableBinaryOutputArchive ar(os);
  ar(value);
}

template <class T>
std::string to_bytes(const T& value) {
  std::string out;
  append_bytes(value, out);
  return out;
}

// Any decoding failure (cereal's "failed to read N bytes", a bad variant index, an absurd
// length that fails to allocate) becomes a ProtocolError naming the message and frame size.
template <class T>
T from_bytes(std::string_view payload, const char* what) {
  try {
    ViewSource source(payload);
    std::istream is(&source);
    FrameInputArchive ar(is);
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

// cereal loads an enum from its underlying byte without a range check. A value no enumerator has
// is a corrupt frame (an outcome of 7 would otherwise count as neither fail nor error, i.e. pass).
// Adding an enumerator changes the protocol: bump kProtocolVersion and the bound here.
template <class E>
void check_enum(E value, E last, const char* what) {
  if (static_cast<uint8_t>(value) > static_cast<uint8_t>(last)) {
    CPRR_THROW_AS(ProtocolError, "malformed frame: {} value {} is out of range (0..{})", what,
                  static_cast<int>(value), static_cast<int>(last));
  }
}

void validate(const ToRank& msg) {
  if (const auto* run = std::get_if<RunCase>(&msg)) {
    check_enum(run->placement, Placement::shuffled, "placement");
  }
}

void validate(const FromRank& msg) {
  if (const auto* done = std::get_if<CaseDone>(&msg)) {
    check_enum(done->outcome, RankOutcome::skip, "rank outcome");
    for (const auto* list : {&done->capture.probes, &done->capture.outputs}) {
      for (const Capture& c : *list) check_enum(c.dtype, kLastDType, "capture dtype");
    }
    for (const CollectiveRecord& c : done->capture.collectives) {
      check_enum(c.dtype, kLastDType, "collective dtype");
    }
  } else if (const auto* catalog = std::get_if<Catalog>(&msg)) {
    for (const CaseInfo& info : catalog->cases) {
      check_enum(info.options.expect, Expect::hang, "case expectation");
    }
  }
}

}  // namespace

namespace {

// The raw magic and version that open a hello and a handshake, checked before anything is
// decoded: a process that is no cprr worker, or one of another version, is named as such.
void check_preamble(std::string_view payload, const char* what) {
  if (payload.size() < 8) {
    CPRR_THROW_AS(ProtocolError, "{} frame too short ({} bytes): is --worker a cprr worker?", what,
                  payload.size());
  }
  const uint32_t magic = get_u32(payload);
  const uint32_t version = get_u32(payload.substr(4));
  if (magic != kProtocolMagic) {
    CPRR_THROW_AS(ProtocolError,
                  "{} has magic {:#010x}, expected {:#010x}: is --worker a cprr worker?", what,
                  magic, kProtocolMagic);
  }
  if (version != kProtocolVersion) {
    CPRR_THROW_AS(
        ProtocolError,
        "worker speaks protocol version {}, this controller speaks {}: rebuild the worker "
        "against this cprr",
        version, kProtocolVersion);
  }
}

std::string with_preamble(std::string body) {
  std::string out;
  put_u32(out, kProtocolMagic);
  put_u32(out, kProtocolVersion);
  return out + body;
}

}  // namespace

std::string encode_hello(const Hello& hello) { return with_preamble(to_bytes(hello)); }

Hello decode_hello(std::string_view payload) {
  check_preamble(payload, "hello");
  return from_bytes<Hello>(payload.substr(8), "hello");
}

std::string encode_handshake(const Handshake& hs) { return with_preamble(to_bytes(hs)); }

Handshake decode_handshake(std::string_view payload) {
  check_preamble(payload, "handshake");
  Handshake hs = from_bytes<Handshake>(payload.substr(8), "handshake");
  check_enum(hs.channel, Channel::agent, "handshake channel");
  return hs;
}

std::string encode(const Welcome& msg) { return to_bytes(msg); }
std::string encode(const SignalRank& msg) { return to_bytes(msg); }
std::string encode(const RankExited& msg) { return to_bytes(msg); }
Welcome decode_welcome(std::string_view payload) { return from_bytes<Welcome>(payload, "welcome"); }
SignalRank decode_signal_rank(std::string_view payload) {
  return from_bytes<SignalRank>(payload, "signal");
}
RankExited decode_rank_exited(std::string_view payload) {
  return from_bytes<RankExited>(payload, "rank exit");
}
std::string encode(const StartRank& msg) { return to_bytes(msg); }
std::string encode(const RankNotStarted& msg) { return to_bytes(msg); }
StartRank decode_start_rank(std::string_view payload) {
  return from_bytes<StartRank>(payload, "start rank");
}
RankNotStarted decode_rank_not_started(std::string_view payload) {
  return from_bytes<RankNotStarted>(payload, "rank not started");
}

std::string encode(const ToRank& msg) { return to_bytes(msg); }
std::string encode(const FromRank& msg) { return to_bytes(msg); }
ToRank decode_to_rank(std::string_view payload) {
  ToRank msg = from_bytes<ToRank>(payload, "controller");
  validate(msg);
  return msg;
}
FromRank decode_from_rank(std::string_view payload) {
  FromRank msg = from_bytes<FromRank>(payload, "rank");
  validate(msg);
  return msg;
}

namespace {

// Writes all of `bytes`, retrying on EINTR and short writes.
void send_all(int fd, std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    // MSG_NOSIGNAL: a peer that died must be an error here (EPIPE), not a SIGPIPE that kills the
    // controller. Plain write() only for non-sockets (tests over pipes).
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(fd, bytes.data() + done, bytes.size() - done);
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

void check_frame_size(std::size_t payload_bytes) {
  CPRR_CHECK(payload_bytes <= kMaxFrameBytes, "refusing to send a {}-byte frame (limit {})",
             payload_bytes, kMaxFrameBytes);
}

}  // namespace

void write_frame(int fd, std::string_view payload) {
  check_frame_size(payload.size());
  std::string frame;
  frame.reserve(4 + payload.size());
  put_u32(frame, static_cast<uint32_t>(payload.size()));
  frame.append(payload);
  send_all(fd, frame);
}

void encode_frame(const FromRank& msg, std::string& frame) {
  frame.assign(4, '\0');  // the length, filled in below
  append_bytes(msg, frame);
  const std::size_t payload = frame.size() - 4;
  check_frame_size(payload);
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((payload >> (8 * i)) & 0xff);
}

void write_encoded_frame(int fd, std::string_view frame) {
  CPRR_CHECK(frame.size() >= 4 && get_u32(frame) == frame.size() - 4,
             "write_encoded_frame: {} bytes are not one frame from encode_frame", frame.size());
  send_all(fd, frame);
}

FrameReader::Fill FrameReader::fill(int fd) {
  if (consumed_ > 0) {  // drop frames already handed out, so the buffer never grows unbounded
    buf_.erase(0, consumed_);
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

std::optional<std::string> read_frame(int fd, FrameReader& reader, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (auto frame = reader.next()) return frame;
    if (timeout_ms >= 0) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      const int ready = left.count() <= 0 ? 0 : ::poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;  // a signal (Ctrl-C): the deadline still holds
      if (ready < 0) throw_errno(__FILE__, __LINE__, "poll(control channel)");
      if (ready == 0) CPRR_THROW_AS(ProtocolError, "no complete frame within {} ms", timeout_ms);
    }
    const FrameReader::Fill r = reader.fill(fd);
    if (r == FrameReader::Fill::eof) {
      if (reader.mid_frame()) CPRR_THROW_AS(ProtocolError, "control channel closed inside a frame");
      return std::nullopt;
    }
  }
}

int control_fd_slot() {
  rlimit lim{};
  CPRR_SYSCALL(::getrlimit(RLIMIT_NOFILE, &lim));
  constexpr rlim_t kSelectLimit = 1024;  // FD_SETSIZE: libraries still using select() stay safe
  return static_cast<int>(std::min(lim.rlim_cur, kSelectLimit) - 1);
}

std::vector<std::string> rank_arguments(int rank, int world_size, int control_fd,
                                        const std::string& rendezvous, std::string_view backend) {
  return {"--rank",       std::to_string(rank),       "--world-size", std::to_string(world_size),
          "--control-fd", std::to_string(control_fd), "--rendezvous", rendezvous,
          "--backend",    std::string(backend)};
}

}  // namespace cprr

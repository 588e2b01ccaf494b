#pragma once
// What the protocol tests share: the ProtocolError a decode throws, raw frame bytes, a socketpair,
// and sample messages with non-trivial values in every field.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "recorder/protocol/protocol.h"
#include "runtime/error.h"
#include "runtime/fd.h"
#include "tests/data/record_printers.h"

namespace cprr::protocol_test {

using namespace std::string_literals;

// Returns the message of the ProtocolError thrown by `fn`; fails the test when `fn` returns or
// throws anything else.
template <class Fn>
std::string protocol_error(Fn&& fn) {
  try {
    fn();
  } catch (const ProtocolError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ProtocolError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected ProtocolError, nothing was thrown";
  return {};
}

// Runs a decode of untrusted bytes: it may succeed or throw ProtocolError, nothing else.
template <class Fn>
void decodes_or_protocol_error(Fn&& fn, std::string_view bytes) {
  try {
    fn();
  } catch (const ProtocolError&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-ProtocolError exception for a " << bytes.size()
                  << "-byte payload: " << e.what();
  } catch (...) {
    ADD_FAILURE() << "non-std exception for a " << bytes.size() << "-byte payload";
  }
}

inline void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline void put_u64_at(std::string& s, std::size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

inline std::string frame_bytes(std::string_view payload) {
  std::string out;
  put_u32(out, static_cast<uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

struct SocketPair {
  UniqueFd a, b;
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      ADD_FAILURE() << "socketpair: " << std::strerror(errno);
      return;
    }
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
};

inline void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    ASSERT_GT(n, 0) << std::strerror(errno);
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Sample messages with non-trivial values in every field.

inline Capture sample_capture(uint32_t seq, std::string raw) {
  Capture c;
  c.seq = seq;
  c.name = "probe/" + std::to_string(seq);
  c.dtype = DType::f64;
  c.shape = {3, -1, 1LL << 40};
  c.bytes = 0x0123456789abcdefULL;
  c.stream = -7;
  c.digest.whole = 0xfedcba9876543210ULL;
  c.digest.chunks = {1, 0xffffffffffffffffULL, 0x8000000000000000ULL};
  c.raw = std::move(raw);
  return c;
}

inline CaseDone sample_case_done() {
  CaseDone d;
  d.execution = 0xdeadbeefcafef00dULL;
  d.outcome = RankOutcome::fail;
  d.error = "expected 3 == 4\nat case.cpp:17";
  d.reset_ms = 1.25;
  d.body_ms = 123456.0625;
  d.first_use = {{"nccl communicator (waited for)", 311.5}, {"symmetric arena", 0.25}};
  d.symmetric_pool = "NCCL window (ncclMemAlloc); peers mapped";
  d.distrusted = "dist.recv raised RuntimeError: Connection closed by peer";
  CaseCapture& cap = d.capture;
  cap.probes.push_back(sample_capture(0, "\0\x01\0\xff"s));
  cap.probes.push_back(sample_capture(1, ""));
  Capture out = sample_capture(2, std::string(300, '\0') + "tail");
  out.dtype = DType::i32;
  out.shape.clear();
  out.digest.chunks.clear();
  cap.outputs.push_back(out);
  cap.allocs.push_back(AllocRecord{.seq = 5,
                                   .is_free = false,
                                   .buffer = 9,
                                   .name = "x",
                                   .pool = "symmetric",
                                   .bytes = 1ULL << 33,
                                   .offset = 4096,
                                   .stream = 2});
  cap.allocs.push_back(AllocRecord{.seq = 6,
                                   .is_free = true,
                                   .buffer = 9,
                                   .name = "x",
                                   .pool = "device",
                                   .bytes = 7,
                                   .offset = 0xffffffffffffff00ULL,
                                   .stream = -1});
  cap.ops.push_back(OpRecord{.seq = 11,
                             .stream = -1,
                             .kind = "host",
                             .name = "fill",
                             .reads = {},
                             .writes = {1, 2, 0xffffffffu},
                             .event = -1,
                             .write_spans = {{0, 7}, {8, 1}, {0xffffffffffffff00ULL, 255}},
                             .moves = true,
                             .touches = {3, 0xffffffffu},
                             .touch_spans = {{1, 2}, {0xffffffffffffff00ULL, 255}}});
  cap.ops.push_back(OpRecord{.seq = 12,
                             .stream = 3,
                             .kind = "wait",
                             .name = "",
                             .reads = {4},
                             .writes = {},
                             .event = 1LL << 35});
  cap.collectives.push_back(CollectiveRecord{.seq = 0,
                                             .kind = "all_to_all_v",
                                             .stream = 1,
                                             .dtype = DType::i64,
                                             .bytes = 1ULL << 36,
                                             .root = -1});
  cap.collectives.push_back(CollectiveRecord{
      .seq = 1, .kind = "broadcast", .stream = 0, .dtype = DType::f32, .bytes = 12, .root = 3});
  cap.collectives.push_back(CollectiveRecord{.seq = 2,
                                             .kind = "all_reduce",
                                             .stream = 2,
                                             .dtype = DType::f64,
                                             .bytes = 64,
                                             .root = -1,
                                             .op = ReduceOp::min});
  cap.timeline.start_ns = INT64_MAX - 7;
  cap.timeline.ops = {OpTime{1, 2}, OpTime{-1, -1}, OpTime{INT64_MAX, INT64_MAX}};
  cap.timeline.allocs = {0, 42};
  return d;
}

template <class T>
T round_trip_to_rank(const T& msg) {
  const std::string bytes = encode(ToRank{msg});
  const ToRank back = decode_to_rank(bytes);
  EXPECT_TRUE(std::holds_alternative<T>(back)) << "variant index " << back.index();
  return std::holds_alternative<T>(back) ? std::get<T>(back) : T{};
}

template <class T>
T round_trip_from_rank(const T& msg) {
  const std::string bytes = encode(FromRank{msg});
  const FromRank back = decode_from_rank(bytes);
  EXPECT_TRUE(std::holds_alternative<T>(back)) << "variant index " << back.index();
  return std::holds_alternative<T>(back) ? std::get<T>(back) : T{};
}

inline Hello sample_hello() {
  return Hello{.rank = 3,
               .world_size = 8,
               .pid = 424242,
               .backend = "cuda",
               .version = "0.1.0",
               .comm_id = std::string("\0nccl\xff-id", 10),
               .phases = {{"rank set-up", 1.25}, {"cuda context", 240}},
               .device = 2,
               .gpu = "gpu-host/GPU-0123456789abcdef"};
}

}  // namespace cprr::protocol_test

// The control protocol: message round trips, the hello's magic/version gate, framing over a real
// socketpair, and malformed input (which must surface as ProtocolError, never as a crash or as any
// other exception type).
#include "recorder/protocol/protocol.h"

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

#include "runtime/error.h"
#include "runtime/fd.h"
#include "tests/data/record_printers.h"

namespace cprr {
namespace {

using namespace std::string_literals;

// ---- helpers ----

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

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_u64_at(std::string& s, std::size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

std::string frame_bytes(std::string_view payload) {
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

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    ASSERT_GT(n, 0) << std::strerror(errno);
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// ---- sample messages with non-trivial values in every field ----

Capture sample_capture(uint32_t seq, std::string raw) {
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

CaseDone sample_case_done() {
  CaseDone d;
  d.execution = 0xdeadbeefcafef00dULL;
  d.outcome = RankOutcome::fail;
  d.error = "expected 3 == 4\nat case.cpp:17";
  d.reset_ms = 1.25;
  d.body_ms = 123456.0625;
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
                             .write_spans = {{0, 7}, {8, 1}, {0xffffffffffffff00ULL, 255}}});
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

// ---- round trips ----

TEST(ProtocolRoundTrip, RunCaseWithParamsForEveryPlacement) {
  for (Placement p :
       {Placement::best_fit, Placement::counter, Placement::never_reuse, Placement::shuffled}) {
    SCOPED_TRACE(std::string(placement_name(p)));
    RunCase rc;
    rc.execution = 0x1122334455667788ULL;
    rc.name = "collectives/all_reduce_ring";
    rc.params = {{"dtype", "f32"}, {"n", "1048576"}, {"empty", ""}, {"nul", "a\0b"s}};
    rc.seed = 0xffffffffffffffffULL;
    rc.placement = p;
    rc.timeline = p == Placement::counter;
    const RunCase back = round_trip_to_rank(rc);
    EXPECT_EQ(back, rc);
    EXPECT_EQ(back.params.at("nul").size(), 3u);
  }
}

TEST(ProtocolRoundTrip, StatusQuery) {
  const StatusQuery back = round_trip_to_rank(StatusQuery{.execution = 0x8000000000000001ULL});
  EXPECT_EQ(back.execution, 0x8000000000000001ULL);
}

TEST(ProtocolRoundTrip, Shutdown) {
  round_trip_to_rank(Shutdown{});
  // The three ToRank alternatives are told apart by the variant index alone.
  EXPECT_NE(encode(ToRank{Shutdown{}}), encode(ToRank{StatusQuery{}}));
}

TEST(ProtocolRoundTrip, BootstrapCarriesBinaryIdsAndAbortIsItsOwnMessage) {
  std::string id(128, '\0');
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 37);
  EXPECT_EQ(round_trip_to_rank(Bootstrap{id}).comm_id, id);
  EXPECT_EQ(round_trip_to_rank(Bootstrap{}).comm_id, "");
  EXPECT_EQ(round_trip_to_rank(Bootstrap{id, "gloo_staged"}).transport, "gloo_staged");
  round_trip_to_rank(Abort{});
  EXPECT_EQ(round_trip_from_rank(Connected{"ncclCommInitRankConfig: unhandled system error"}).error,
            "ncclCommInitRankConfig: unhandled system error");
  EXPECT_EQ(round_trip_from_rank(Connected{}).error, "");
  const Connected with_pool = round_trip_from_rank(
      Connected{{}, "NCCL window; peers mapped", {{"nccl communicator", 412.5}, {"window", 3}}});
  EXPECT_EQ(with_pool.error, "");
  EXPECT_EQ(with_pool.symmetric_pool, "NCCL window; peers mapped");
  EXPECT_EQ(with_pool.phases,
            (std::vector<StartupPhase>{{"nccl communicator", 412.5}, {"window", 3}}));
  EXPECT_NE(encode(ToRank{Abort{}}), encode(ToRank{Shutdown{}}));
}

TEST(ProtocolRoundTrip, CaseDoneWithCaptures) {
  const CaseDone done = sample_case_done();
  EXPECT_EQ(round_trip_from_rank(done), done);
}

TEST(ProtocolRoundTrip, CaseDoneEveryOutcome) {
  for (RankOutcome o : {RankOutcome::ok, RankOutcome::fail, RankOutcome::error}) {
    CaseDone d = sample_case_done();
    d.outcome = o;
    EXPECT_EQ(round_trip_from_rank(d).outcome, o);
  }
}

TEST(ProtocolRoundTrip, WatchdogStatus) {
  WatchdogStatus ws;
  ws.execution = 42;
  ws.phase = "body";
  ws.entered_seq = 7;
  ws.entered_kind = "all_reduce";
  ws.completed_seq = -1;
  ws.completed_kind = "";
  ws.running = {"stream 1 (compute): kernel scale", "stream 2 (comm): collective all_reduce #7"};
  EXPECT_EQ(round_trip_from_rank(ws), ws);
}

TEST(ProtocolRoundTrip, CatalogWithGridExpectAndTimeout) {
  Catalog cat;
  CaseInfo a;
  a.name = "faults/segfault_rank1";
  a.options.world_sizes = {2, 3, 8};
  a.options.grid = {GridAxis{"n", {"1", "4096", "65537"}}, GridAxis{"dtype", {"u8", "f64"}}};
  a.options.expect = Expect::crash;
  a.options.timeout_s = 2.5;
  a.options.description = "rank 1 dereferences null";
  CaseInfo b;
  b.name = "faults/skip_collective";
  b.options.world_sizes = {4};
  b.options.grid = {};
  b.options.expect = Expect::hang;
  b.options.timeout_s = 0;
  b.options.description = "";
  cat.cases = {a, b};
  EXPECT_EQ(round_trip_from_rank(cat), cat);
}

TEST(ProtocolRoundTrip, EmptyCatalog) {
  EXPECT_TRUE(round_trip_from_rank(Catalog{}).cases.empty());
}

// ---- hello ----

Hello sample_hello() {
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

TEST(Hello, RoundTrip) {
  const Hello h = sample_hello();
  // Every field, comm_id's binary bytes (an embedded NUL) included.
  EXPECT_EQ(decode_hello(encode_hello(h)), h);
}

TEST(Hello, StartsWithRawMagicAndVersion) {
  const std::string bytes = encode_hello(sample_hello());
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(0, 4), "CPRR");
  std::string version;
  put_u32(version, kProtocolVersion);
  EXPECT_EQ(bytes.substr(4, 4), version);
}

TEST(Hello, WrongMagicIsRefused) {
  std::string bytes = encode_hello(sample_hello());
  bytes[0] = 'X';
  const std::string msg = protocol_error([&] { decode_hello(bytes); });
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
  // A non-cprr program's first bytes (e.g. text it prints) are refused the same way.
  const std::string text = protocol_error([] { decode_hello("hello world\n"); });
  EXPECT_NE(text.find("magic"), std::string::npos) << text;
}

TEST(Hello, OtherVersionNamesBothVersions) {
  std::string bytes = encode_hello(sample_hello());
  const uint32_t other = kProtocolVersion + 1000;
  std::string v;
  put_u32(v, other);
  bytes.replace(4, 4, v);
  const std::string msg = protocol_error([&] { decode_hello(bytes); });
  EXPECT_NE(msg.find(std::to_string(other)), std::string::npos) << msg;
  EXPECT_NE(msg.find("speaks " + std::to_string(kProtocolVersion)), std::string::npos) << msg;
}

TEST(Hello, VersionIsCheckedBeforeTheBodyIsDecoded) {
  // A future worker may change the Hello layout: the refusal must still name the versions.
  std::string bytes;
  put_u32(bytes, kProtocolMagic);
  put_u32(bytes, kProtocolVersion + 1);
  bytes += "\x07garbage";
  const std::string msg = protocol_error([&] { decode_hello(bytes); });
  EXPECT_NE(msg.find(std::to_string(kProtocolVersion + 1)), std::string::npos) << msg;
}

TEST(Hello, TooShortPayloadIsRefused) {
  const std::string full = encode_hello(sample_hello());
  for (std::size_t n = 0; n < 8; ++n) {
    protocol_error([&] { decode_hello(std::string_view(full).substr(0, n)); });
  }
  // Magic and version alone, without the body, is also too short.
  protocol_error([&] { decode_hello(std::string_view(full).substr(0, 8)); });
}

TEST(Hello, TruncatedOrPaddedBodyIsRefused) {
  const std::string full = encode_hello(sample_hello());
  for (std::size_t n = 8; n < full.size(); ++n) {
    protocol_error([&] { decode_hello(std::string_view(full).substr(0, n)); });
  }
  const std::string msg = protocol_error([&] { decode_hello(full + "!"); });
  EXPECT_NE(msg.find("trailing"), std::string::npos) << msg;
}

// ---- framing ----

TEST(Frame, WriteFrameIsLittleEndianLengthThenPayload) {
  SocketPair sp;
  write_frame(sp.a.get(), "abc"s + '\0');
  sp.a.reset();
  char buf[16];
  const ssize_t n = ::read(sp.b.get(), buf, sizeof buf);
  ASSERT_EQ(n, 8);
  EXPECT_EQ(std::string(buf, 8), "\x04\0\0\0abc\0"s);
}

TEST(Frame, BackToBackFramesAreAllRead) {
  SocketPair sp;
  const std::vector<std::string> payloads = {encode(FromRank{sample_case_done()}),
                                             "",
                                             "x",
                                             std::string(1000, '\0'),
                                             encode_hello(sample_hello()),
                                             encode(ToRank{Shutdown{}})};
  // Everything is in the socket before the first read, so one read() returns many frames; the
  // reader must keep the bytes of later frames for later calls.
  for (const std::string& p : payloads) write_frame(sp.a.get(), p);
  sp.a.reset();
  FrameReader reader;
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    std::optional<std::string> f = read_frame(sp.b.get(), reader);
    ASSERT_TRUE(f.has_value()) << "frame " << i << " lost";
    EXPECT_EQ(*f, payloads[i]) << "frame " << i;
  }
  EXPECT_FALSE(reader.mid_frame());
  EXPECT_EQ(read_frame(sp.b.get(), reader), std::nullopt);
  EXPECT_EQ(read_frame(sp.b.get(), reader), std::nullopt);  // EOF stays EOF
}

TEST(Frame, FramesLargerThanOneReadAreReassembled) {
  SocketPair sp;
  // Larger than the reader's 64 KiB read size and than the socket buffer: a writer thread is
  // needed.
  std::vector<std::string> payloads;
  std::mt19937 rng(7);
  for (std::size_t size :
       {std::size_t{300000}, std::size_t{65531}, std::size_t{1}, std::size_t{1 << 20}}) {
    std::string p(size, '\0');
    for (char& c : p) c = static_cast<char>(rng());
    payloads.push_back(std::move(p));
  }
  std::thread writer([&] {
    for (const std::string& p : payloads) write_frame(sp.a.get(), p);
    sp.a.reset();
  });
  FrameReader reader;
  std::vector<std::string> got;
  while (std::optional<std::string> f = read_frame(sp.b.get(), reader)) got.push_back(*f);
  writer.join();
  ASSERT_EQ(got.size(), payloads.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i] == payloads[i]) << "frame " << i;
}

TEST(Frame, EncodedFramesAreWriteFramesOfTheEncodingAndReuseTheBuffer) {
  // A rank encodes every result into one buffer: a long frame, then a short one, then the long
  // one again must each be exactly what write_frame(encode(msg)) sends.
  CaseDone big = sample_case_done();
  big.capture.outputs[0].digest.chunks.assign(4096, 0x0123456789abcdefULL);  // a 256 MiB capture
  const std::vector<FromRank> msgs = {FromRank{big}, FromRank{WatchdogStatus{}}, FromRank{big}};
  std::string frame;
  SocketPair sp;
  std::thread writer([&] {
    for (const FromRank& m : msgs) {
      encode_frame(m, frame);
      EXPECT_EQ(frame, frame_bytes(encode(m)));
      write_encoded_frame(sp.a.get(), frame);
    }
    sp.a.reset();
  });
  FrameReader reader;
  std::vector<FromRank> got;
  while (std::optional<std::string> f = read_frame(sp.b.get(), reader)) {
    got.push_back(decode_from_rank(*f));
  }
  writer.join();
  ASSERT_EQ(got.size(), msgs.size());
  EXPECT_EQ(std::get<CaseDone>(got[0]), big);
  EXPECT_TRUE(std::holds_alternative<WatchdogStatus>(got[1]));
  EXPECT_EQ(std::get<CaseDone>(got[2]), big);
}

TEST(Frame, WriteEncodedFrameRefusesBytesThatAreNotOneFrame) {
  SocketPair sp;
  EXPECT_THROW(write_encoded_frame(sp.a.get(), "ab"), Error);
  EXPECT_THROW(write_encoded_frame(sp.a.get(), frame_bytes("abc") + "d"), Error);
}

TEST(Frame, EofBeforeAnyFrameReturnsNullopt) {
  SocketPair sp;
  sp.a.reset();
  FrameReader reader;
  EXPECT_EQ(read_frame(sp.b.get(), reader), std::nullopt);
}

TEST(Frame, EofInsideAFrameThrows) {
  const std::string full = frame_bytes("0123456789");
  // Cut inside the length prefix, right after it, and inside the payload.
  for (std::size_t cut :
       {std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{9}, full.size() - 1}) {
    SCOPED_TRACE(cut);
    SocketPair sp;
    write_frame(sp.a.get(), "first");
    write_all(sp.a.get(), std::string_view(full).substr(0, cut));
    sp.a.reset();
    FrameReader reader;
    EXPECT_EQ(read_frame(sp.b.get(), reader), "first");
    EXPECT_TRUE(reader.mid_frame());
    protocol_error([&] { read_frame(sp.b.get(), reader); });
  }
}

TEST(Frame, LengthAboveLimitThrows) {
  SocketPair sp;
  std::string prefix;
  put_u32(prefix, kMaxFrameBytes + 1);
  write_all(sp.a.get(), prefix);
  FrameReader reader;
  // Refused as soon as the prefix is in, without waiting for (or buffering) the payload.
  const std::string msg = protocol_error([&] { read_frame(sp.b.get(), reader); });
  EXPECT_NE(msg.find(std::to_string(kMaxFrameBytes + 1)), std::string::npos) << msg;

  FrameReader direct;
  direct.append("\xff\xff\xff\xff");
  protocol_error([&] { direct.next(); });
}

TEST(Frame, LengthAtLimitIsAccepted) {
  FrameReader reader;
  std::string prefix;
  put_u32(prefix, kMaxFrameBytes);
  reader.append(prefix);
  EXPECT_EQ(reader.next(), std::nullopt);  // waits for the payload instead of refusing
  EXPECT_TRUE(reader.mid_frame());
}

TEST(Frame, ByteAtATimeAppendYieldsTheSameFrames) {
  const std::vector<std::string> payloads = {encode(FromRank{sample_case_done()}), "",
                                             encode(ToRank{StatusQuery{.execution = 9}}),
                                             std::string(3, '\0')};
  std::string stream;
  for (const std::string& p : payloads) stream += frame_bytes(p);
  std::vector<std::size_t> ends;  // stream offset just past each frame
  for (const std::string& p : payloads)
    ends.push_back((ends.empty() ? 0 : ends.back()) + 4 + p.size());
  FrameReader reader;
  std::vector<std::string> got;
  std::size_t complete = 0;  // frames whose last byte has been appended
  for (std::size_t i = 0; i < stream.size(); ++i) {
    reader.append(std::string_view(stream).substr(i, 1));
    while (complete < ends.size() && ends[complete] <= i + 1) ++complete;
    while (std::optional<std::string> f = reader.next()) got.push_back(std::move(*f));
    // A frame comes out exactly when its last byte is in, never earlier or later.
    ASSERT_EQ(got.size(), complete) << "after byte " << i;
    const bool at_boundary = complete > 0 && ends[complete - 1] == i + 1;
    EXPECT_EQ(reader.mid_frame(), !at_boundary) << "after byte " << i;
  }
  EXPECT_EQ(got, payloads);
  EXPECT_FALSE(reader.mid_frame());
  EXPECT_EQ(reader.next(), std::nullopt);
}

TEST(Frame, FillOnNonBlockingSocket) {
  SocketPair sp;
  ASSERT_EQ(::fcntl(sp.b.get(), F_SETFL, ::fcntl(sp.b.get(), F_GETFL) | O_NONBLOCK), 0);
  FrameReader reader;
  EXPECT_EQ(reader.fill(sp.b.get()), FrameReader::Fill::would_block);
  write_frame(sp.a.get(), "ping");
  EXPECT_EQ(reader.fill(sp.b.get()), FrameReader::Fill::data);
  EXPECT_EQ(reader.next(), "ping");
  sp.a.reset();
  EXPECT_EQ(reader.fill(sp.b.get()), FrameReader::Fill::eof);
}

// ---- malformed payloads ----

TEST(ProtocolMalformed, EveryTruncationOfCaseDoneThrows) {
  const std::string full = encode(FromRank{sample_case_done()});
  ASSERT_GT(full.size(), 500u);
  // Every field is required, so every strict prefix ends inside a read.
  for (std::size_t n = 0; n < full.size(); ++n) {
    const std::string_view cut = std::string_view(full).substr(0, n);
    try {
      decode_from_rank(cut);
      ADD_FAILURE() << "a " << n << "-byte prefix of a " << full.size() << "-byte frame decoded";
    } catch (const ProtocolError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "prefix " << n << ": non-ProtocolError: " << e.what();
    }
  }
}

TEST(ProtocolMalformed, EveryTruncationOfRunCaseThrows) {
  RunCase rc{.execution = 1,
             .name = "a/b",
             .params = {{"k", "v"}},
             .seed = 2,
             .placement = Placement::counter};
  const std::string full = encode(ToRank{rc});
  for (std::size_t n = 0; n < full.size(); ++n) {
    protocol_error([&] { decode_to_rank(std::string_view(full).substr(0, n)); });
  }
}

TEST(ProtocolMalformed, TrailingGarbageThrows) {
  const std::string done = encode(FromRank{sample_case_done()});
  const std::string msg = protocol_error([&] { decode_from_rank(done + "\0"s); });
  EXPECT_NE(msg.find("1 trailing bytes"), std::string::npos) << msg;
  protocol_error([&] { decode_from_rank(done + done); });
  protocol_error([&] { decode_to_rank(encode(ToRank{Shutdown{}}) + "xyz"); });
  protocol_error([&] { decode_to_rank(encode(ToRank{StatusQuery{.execution = 3}}) + "\x01"); });
}

TEST(ProtocolMalformed, UnknownVariantIndexThrows) {
  // Layout: one endianness byte, then the variant index as a little-endian int32.
  std::string bytes = encode(ToRank{Shutdown{}});
  ASSERT_EQ(bytes.size(), 5u);
  for (uint32_t index : {3u, 0x7fffffffu, 0xffffffffu}) {
    for (int i = 0; i < 4; ++i) bytes[1 + i] = static_cast<char>((index >> (8 * i)) & 0xff);
    protocol_error([&] { decode_to_rank(bytes); });
    protocol_error([&] { decode_from_rank(bytes); });
  }
}

TEST(ProtocolMalformed, HugeLengthFieldThrowsWithoutAllocating) {
  // CaseDone layout: endianness (1), index (4), execution (8), outcome (1), then the error
  // string's uint64 length. A corrupt length far beyond the frame must fail fast.
  std::string bytes = encode(FromRank{sample_case_done()});
  for (uint64_t len : {uint64_t{1} << 40, uint64_t{1} << 62, uint64_t{bytes.size()}}) {
    put_u64_at(bytes, 14, len);
    const std::string msg = protocol_error([&] { decode_from_rank(bytes); });
    // Refused by the length check, not by a failed allocation or a short read after one.
    EXPECT_NE(msg.find("length field " + std::to_string(len) + " exceeds"), std::string::npos)
        << msg;
  }
  // The same for a container of structs (a RunCase's params map, after a 1-byte name).
  std::string rc = encode(ToRank{RunCase{.execution = 1, .name = "n", .params = {{"a", "b"}}}});
  put_u64_at(rc, 1 + 4 + 8 + 8 + 1, uint64_t{1} << 50);
  const std::string msg = protocol_error([&] { decode_to_rank(rc); });
  EXPECT_NE(msg.find("exceeds"), std::string::npos) << msg;
}

TEST(ProtocolMalformed, OutOfRangeEnumsAndBoolsThrow) {
  // A rank that reports outcome 7 must not be counted as passing.
  CaseDone d;
  std::string done = encode(FromRank{d});
  ASSERT_EQ(done[13], static_cast<char>(RankOutcome::ok));
  done[13] = 7;
  protocol_error([&] { decode_from_rank(done); });

  // RunCase: the placement is the one byte two encodings differing only in it differ in.
  std::string rc = encode(ToRank{RunCase{}});
  const std::string other = encode(ToRank{RunCase{.placement = Placement::never_reuse}});
  ASSERT_EQ(rc.size(), other.size());
  std::size_t at = 0;
  while (at < rc.size() && rc[at] == other[at]) ++at;
  ASSERT_LT(at, rc.size());
  rc[at] = 4;
  protocol_error([&] { decode_to_rank(rc); });
  rc[at] = static_cast<char>(Placement::never_reuse);
  EXPECT_EQ(std::get<RunCase>(decode_to_rank(rc)).placement, Placement::never_reuse);

  // A bool byte other than 0 or 1 (AllocRecord::is_free) is not a bool.
  CaseDone with_alloc;
  with_alloc.capture.allocs.push_back(AllocRecord{.seq = 1, .is_free = true});
  std::string alloc = encode(FromRank{with_alloc});
  // endianness 1, index 4, execution 8, outcome 1, error length 8, reset_ms 8, body_ms 8,
  // probes/outputs/allocs counts 8 each, AllocRecord::seq 8: is_free is byte 70.
  ASSERT_EQ(alloc[70], 1);
  alloc[70] = 2;
  protocol_error([&] { decode_from_rank(alloc); });
}

TEST(ProtocolMalformed, RandomBytesNeverCrash) {
  std::mt19937 rng(20240611);
  for (int i = 0; i < 400; ++i) {
    std::string bytes(rng() % 96, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    // Half the inputs get a valid endianness byte and variant index so decoding goes deeper.
    if (i % 2 == 0 && bytes.size() >= 5) {
      bytes[0] = 1;
      bytes[1] = static_cast<char>(rng() % 3);
      bytes[2] = bytes[3] = bytes[4] = 0;
    }
    decodes_or_protocol_error([&] { decode_to_rank(bytes); }, bytes);
    decodes_or_protocol_error([&] { decode_from_rank(bytes); }, bytes);
    decodes_or_protocol_error([&] { decode_hello(bytes); }, bytes);
    std::string hello;
    put_u32(hello, kProtocolMagic);
    put_u32(hello, kProtocolVersion);
    decodes_or_protocol_error([&] { decode_hello(hello + bytes); }, bytes);
    FrameReader reader;
    reader.append(bytes);
    try {
      while (reader.next()) {
      }
    } catch (const ProtocolError&) {
    }
  }
}

TEST(ProtocolMalformed, MutatedCaseDoneNeverCrashes) {
  const std::string valid = encode(FromRank{sample_case_done()});
  std::mt19937 rng(99);
  for (int i = 0; i < 400; ++i) {
    std::string bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Past the index, so the decoder walks into the CaseDone body.
      bytes[5 + rng() % (bytes.size() - 5)] = static_cast<char>(rng());
    }
    decodes_or_protocol_error([&] { decode_from_rank(bytes); }, bytes);
  }
}

// A signal arriving while read_frame waits (Ctrl-C with cprecord's handler installed) must not
// turn the wait into a blocking read without deadline: the timeout still holds. Should the read
// block, the late frame written at 1.5 s comes back instead of the timeout.
TEST(ProtocolFraming, ReadFrameKeepsItsDeadlineAcrossASignal) {
  struct sigaction quiet {
  }, previous{};
  quiet.sa_handler = [](int) {};
  sigemptyset(&quiet.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR1, &quiet, &previous), 0);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd mine(sv[0]), peer(sv[1]);
  const pthread_t reader_thread = ::pthread_self();
  std::thread poke([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::pthread_kill(reader_thread, SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    write_frame(peer.get(), "late");
  });
  FrameReader reader;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(read_frame(mine.get(), reader, 300), ProtocolError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1400));
  poke.join();
  ::sigaction(SIGUSR1, &previous, nullptr);
}

}  // namespace
}  // namespace cprr

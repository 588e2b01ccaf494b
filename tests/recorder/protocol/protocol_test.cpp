// The control protocol's messages: every message round-trips, the hello's magic and version gate
// comes before the body is decoded, and the launch messages (handshake, welcome, signal, exit)
// round-trip behind the same gate. Framing: protocol_frame_test.cpp; malformed input:
// protocol_malformed_test.cpp.
#include "recorder/protocol/protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "runtime/error.h"
#include "tests/data/record_printers.h"
#include "tests/recorder/protocol/protocol_support.h"

namespace cprr {
namespace {

using namespace std::string_literals;
using namespace protocol_test;  // NOLINT(google-build-using-namespace): this folder's own helpers

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
  for (const CollectiveTransport t :
       {CollectiveTransport::nccl, CollectiveTransport::gloo_staged, CollectiveTransport::gloo}) {
    EXPECT_EQ(round_trip_to_rank(Bootstrap{id, t}).transport, t);
  }
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
  for (RankOutcome o :
       {RankOutcome::ok, RankOutcome::fail, RankOutcome::error, RankOutcome::skip}) {
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
  cat.files = {"/home/u/tests/test_model.py", "/home/u/tests/test_pipe line.py"};
  EXPECT_EQ(round_trip_from_rank(cat), cat);
}

TEST(ProtocolRoundTrip, EmptyCatalog) {
  EXPECT_TRUE(round_trip_from_rank(Catalog{}).cases.empty());
}

// ---- hello ----

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

// ---- the launch messages ----

TEST(LaunchProtocol, HandshakeRoundTripsBehindMagicAndVersion) {
  const Handshake hs{"tok", 7, 1, 4, Channel::err, "node-a", 4242};
  const std::string wire = encode_handshake(hs);
  EXPECT_EQ(decode_handshake(wire), hs);
  std::string old = wire;
  old[4] = static_cast<char>(kProtocolVersion - 1);
  EXPECT_THROW(decode_handshake(old), ProtocolError);
  std::string bad_channel = wire;  // the channel byte sits before host's length field
  const std::size_t at = wire.size() - (8 + 6 + 4) - 1;
  bad_channel[at] = 9;
  EXPECT_THROW(decode_handshake(bad_channel), ProtocolError);
}

TEST(LaunchProtocol, NodeAgentMessagesRoundTrip) {
  const Handshake agent{"tok", 0, 1, 2, Channel::agent, "node-b", 77};
  EXPECT_EQ(decode_handshake(encode_handshake(agent)), agent);
  const StartRank start{9, 3, 4, 1, 2, "/shared/w9", "cuda", true, {{"NCCL_NVLS_ENABLE", "0"}}};
  EXPECT_EQ(decode_start_rank(encode(start)), start);
  const RankNotStarted no{9, 3, "the template process ended"};
  EXPECT_EQ(decode_rank_not_started(encode(no)), no);
  EXPECT_THROW(decode_start_rank(encode(start).substr(0, 10)), ProtocolError);
}

TEST(LaunchProtocol, WelcomeSignalAndExitRoundTrip) {
  const Welcome w = decode_welcome(encode(Welcome{"", {{"A", "1"}, {"B", ""}}}));
  EXPECT_EQ(w.env, (std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", ""}}));
  EXPECT_EQ(decode_signal_rank(encode(SignalRank{15})).signal, 15);
  const RankExited e = decode_rank_exited(encode(RankExited{ExitInfo{-1, 9}}));
  EXPECT_EQ(e.exit.signal, 9);
  EXPECT_EQ(e.exit.describe(), "killed by signal 9 (SIGKILL)");
}

}  // namespace
}  // namespace cprr

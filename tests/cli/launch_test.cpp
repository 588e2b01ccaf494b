// Ranks started by a launcher: the run's token, TCP endpoints, the launchers' command lines, the
// launcher options as the command line checks them, the launch wire messages, and the listener
// that authenticates every connection (wrong token, version, world, rank or a duplicate channel
// is refused and reported; a world's four channels per rank are accepted).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_options.h"
#include "data/text_forms.h"
#include "recorder/engine/launcher.h"
#include "recorder/engine/rank_listener.h"
#include "recorder/engine/world.h"
#include "recorder/launch/tcp.h"
#include "recorder/launch/token.h"
#include "recorder/protocol/protocol.h"
#include "runtime/error.h"
#include "tests/data/record_printers.h"

namespace cprr {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// ---- token ----

TEST(Token, IsSixtyFourHexDigitsAndFreshEachTime) {
  const std::string a = make_token();
  const std::string b = make_token();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](char c) { return std::isxdigit(c) != 0; }));
  EXPECT_NE(a, b);
}

TEST(Token, EqualOnlyWhenEveryByteAndTheLengthMatch) {
  const std::string t = make_token();
  EXPECT_TRUE(tokens_equal(t, t));
  std::string last = t;
  last.back() = last.back() == '0' ? '1' : '0';
  std::string first = t;
  first.front() = first.front() == '0' ? '1' : '0';
  EXPECT_FALSE(tokens_equal(t, last));
  EXPECT_FALSE(tokens_equal(t, first));
  EXPECT_FALSE(tokens_equal(t, t.substr(0, 63)));
  EXPECT_FALSE(tokens_equal(t, ""));
  EXPECT_TRUE(tokens_equal("", ""));
}

// ---- endpoints ----

TEST(Endpoint, ParsesHostPortHostAloneAndBracketedV6) {
  const Endpoint a = parse_endpoint("node-7:29500", "--listen");
  EXPECT_EQ(a.host, "node-7");
  EXPECT_EQ(a.port, 29500);
  const Endpoint b = parse_endpoint("10.0.0.1", "--listen");
  EXPECT_EQ(b.host, "10.0.0.1");
  EXPECT_EQ(b.port, 0);
  const Endpoint c = parse_endpoint("[::1]:80", "--listen");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 80);
  EXPECT_EQ(c.str(), "[::1]:80");
  EXPECT_EQ(a.str(), "node-7:29500");
}

TEST(Endpoint, RefusesBadPortsAndUnbracketedV6NamingTheOption) {
  for (const char* bad : {"h:", "h:65536", "h:12x", "::1", "[::1", "[::1]x", "h :1"}) {
    try {
      parse_endpoint(bad, "--listen");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--listen"), std::string::npos) << e.what();
    }
  }
}

TEST(Endpoint, ListenOnAnyPortThenConnect) {
  UniqueFd l = listen_tcp(Endpoint{"127.0.0.1", 0});
  const Endpoint bound = local_endpoint(l.get());
  EXPECT_EQ(bound.host, "127.0.0.1");
  EXPECT_GT(bound.port, 0);
  UniqueFd c = connect_tcp(bound, milliseconds(2000));
  EXPECT_GE(c.get(), 0);
}

TEST(Endpoint, ConnectToNothingFailsNamingTheAddress) {
  UniqueFd l = listen_tcp(Endpoint{"127.0.0.1", 0});
  const Endpoint bound = local_endpoint(l.get());
  l.reset();  // nobody listens there now
  try {
    connect_tcp(bound, milliseconds(300));
    ADD_FAILURE() << "connected to a closed port";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bound.str()), std::string::npos) << e.what();
  }
}

// ---- launcher command lines ----

const std::vector<std::string> kRankArgv{"/opt/cprr/cpworker", "--connect", "h:1", "--world", "3"};

bool contains_sequence(const std::vector<std::string>& v, const std::vector<std::string>& seq) {
  return std::search(v.begin(), v.end(), seq.begin(), seq.end()) != v.end();
}

TEST(LauncherArgv, MpirunOnThisHostExportsTheTokenByNameAndOversubscribes) {
  LaunchOptions o;
  o.kind = LauncherKind::mpirun;
  const auto argv = launcher_argv(o, 4, kRankArgv);
  EXPECT_EQ(argv.front(), "mpirun");
  EXPECT_TRUE(contains_sequence(argv, {"-np", "4"}));
  EXPECT_TRUE(contains_sequence(argv, {"-x", "CPRR_TOKEN"}));
  EXPECT_TRUE(contains_sequence(argv, {"--oversubscribe"}));
  EXPECT_FALSE(contains_sequence(argv, {"--host"}));
  // The rank command comes last, whole.
  EXPECT_TRUE(std::equal(kRankArgv.rbegin(), kRankArgv.rend(), argv.rbegin()));
}

TEST(LauncherArgv, MpirunAcrossHostsWithRanksPerNodeAndExtraArgs) {
  LaunchOptions o;
  o.kind = LauncherKind::mpirun;
  o.program = "/usr/lib/openmpi/bin/mpirun";
  o.hosts = {"a", "b"};
  o.gpus_per_node = 8;
  o.extra = {"--mca", "btl_tcp_if_include", "eth0"};
  const auto argv = launcher_argv(o, 16, kRankArgv);
  EXPECT_EQ(argv.front(), o.program);
  EXPECT_TRUE(contains_sequence(argv, {"--host", "a,b"}));
  EXPECT_TRUE(contains_sequence(argv, {"--map-by", "ppr:8:node"}));
  EXPECT_FALSE(contains_sequence(argv, {"--oversubscribe"}));
  // Extra arguments go to the launcher, before the rank command.
  const auto mca = std::search(argv.begin(), argv.end(), o.extra.begin(), o.extra.end());
  const auto worker = std::find(argv.begin(), argv.end(), kRankArgv.front());
  ASSERT_NE(mca, argv.end());
  EXPECT_LT(mca, worker);
}

TEST(LauncherArgv, SrunTakesNodesPartitionAndGpusPerNode) {
  LaunchOptions o;
  o.kind = LauncherKind::srun;
  o.hosts = {"gpu01", "gpu02"};
  o.partition = "a100";
  o.gpus_per_node = 4;
  const auto argv = launcher_argv(o, 8, kRankArgv);
  EXPECT_EQ(argv.front(), "srun");
  for (const char* a :
       {"--ntasks=8", "--nodelist=gpu01,gpu02", "--partition=a100", "--ntasks-per-node=4",
        "--gpus-per-node=4", "--kill-on-bad-exit=0", "--export=ALL"}) {
    EXPECT_TRUE(contains_sequence(argv, {a})) << a;
  }
  EXPECT_TRUE(std::equal(kRankArgv.rbegin(), kRankArgv.rend(), argv.rbegin()));
}

TEST(LauncherArgv, NoArgumentEverCarriesTheTokenOrAShell) {
  const std::string token = make_token();
  for (LauncherKind k : {LauncherKind::mpirun, LauncherKind::srun}) {
    LaunchOptions o;
    o.kind = k;
    for (const std::string& a : launcher_argv(o, 2, kRankArgv)) {
      EXPECT_EQ(a.find(token), std::string::npos);
      EXPECT_NE(a, "sh");
      EXPECT_NE(a, "-c");
    }
  }
}

TEST(LauncherArgv, DescribeNamesTheLauncherAndItsOptions) {
  LaunchOptions o;
  EXPECT_EQ(describe(o), "local");
  o.kind = LauncherKind::srun;
  o.hosts = {"a", "b"};
  o.partition = "p";
  EXPECT_EQ(describe(o), "srun hosts=a,b partition=p");
  EXPECT_EQ(parse_launcher("mpirun"), LauncherKind::mpirun);
  EXPECT_FALSE(parse_launcher("torchrun").has_value());
}

TEST(LauncherArgv, RanksAreLocalOnlyForMpirunWithoutAnyHostOption) {
  LaunchOptions o;
  o.kind = LauncherKind::mpirun;
  EXPECT_TRUE(o.all_local());
  o.extra = {"--mca", "btl", "self"};
  EXPECT_TRUE(o.all_local());
  for (const char* host_option : {"--hostfile", "-hostfile", "--host", "-H", "--machinefile"}) {
    o.extra = {host_option, "x"};
    EXPECT_FALSE(o.all_local()) << host_option;
  }
  o.extra.clear();
  o.hosts = {"a"};
  EXPECT_FALSE(o.all_local());
  o.hosts.clear();
  o.kind = LauncherKind::srun;
  EXPECT_FALSE(o.all_local()) << "srun places ranks on the allocation's nodes";
  EXPECT_EQ(listen_endpoint(o).host, "0.0.0.0");
  o.kind = LauncherKind::mpirun;
  EXPECT_EQ(listen_endpoint(o).host, "127.0.0.1");
  o.listen = "10.1.2.3:29500";
  EXPECT_EQ(listen_endpoint(o).port, 29500);
  EXPECT_EQ(advertised_host(o, Endpoint{"10.1.2.3", 29500}), "10.1.2.3");
  o.advertise = "head";
  EXPECT_EQ(advertised_host(o, Endpoint{"0.0.0.0", 1}), "head");
}

// ---- the command line's launcher options ----

LaunchOptions parse_launch(std::vector<std::string> args) {
  CLI::App app;
  LaunchFlags flags;
  add_launch_options(app, flags);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse
  app.parse(args);
  return finish_launch_options(flags);
}

std::string usage_error(std::vector<std::string> args) {
  try {
    parse_launch(std::move(args));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchFlags, LocalIsTheDefaultAndRefusesLauncherOptions) {
  EXPECT_EQ(parse_launch({}).kind, LauncherKind::local);
  EXPECT_NE(usage_error({"--hosts", "a,b"}).find("--hosts only means something with --launcher"),
            std::string::npos);
  EXPECT_NE(usage_error({"--listen", "0.0.0.0:1"}).find("--listen"), std::string::npos);
}

TEST(LaunchFlags, MpirunWithItsOptions) {
  const LaunchOptions o = parse_launch(
      {"--launcher", "mpirun", "--launcher-path", "/bin/true", "--hosts", "a,b", "--gpus-per-node",
       "2", "--launcher-arg=--mca", "--launcher-arg", "x", "--listen", "0.0.0.0:29500"});
  EXPECT_EQ(o.kind, LauncherKind::mpirun);
  EXPECT_EQ(o.hosts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.gpus_per_node, 2);
  EXPECT_EQ(o.extra, (std::vector<std::string>{"--mca", "x"}));
  EXPECT_EQ(o.listen, "0.0.0.0:29500");
}

TEST(LaunchFlags, RefusesWhatDoesNotFit) {
  EXPECT_NE(
      usage_error({"--launcher", "mpirun", "--launcher-path", "/bin/true", "--partition", "p"})
          .find("--partition is Slurm's"),
      std::string::npos);
  EXPECT_NE(usage_error({"--launcher", "srun", "--launcher-path", "/nonexistent/srun"})
                .find("--launcher-path /nonexistent/srun is not an executable file"),
            std::string::npos);
  EXPECT_NE(
      usage_error({"--launcher", "mpirun", "--launcher-path", "/bin/true", "--listen", "h:99999"})
          .find("--listen"),
      std::string::npos);
  EXPECT_NE(usage_error({"--launcher", "mpirun", "--launcher-path", "/bin/true", "--shared-dir",
                         "/nonexistent"})
                .find("--shared-dir /nonexistent is not a directory"),
            std::string::npos);
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

TEST(LaunchProtocol, WelcomeSignalAndExitRoundTrip) {
  const Welcome w = decode_welcome(encode(Welcome{"", {{"A", "1"}, {"B", ""}}}));
  EXPECT_EQ(w.env, (std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", ""}}));
  EXPECT_EQ(decode_signal_rank(encode(SignalRank{15})).signal, 15);
  const RankExited e = decode_rank_exited(encode(RankExited{ExitInfo{-1, 9}}));
  EXPECT_EQ(e.exit.signal, 9);
  EXPECT_EQ(e.exit.describe(), "killed by signal 9 (SIGKILL)");
}

// ---- the listener ----

struct FakeRank {
  UniqueFd fd;
  Welcome welcome;
};

// Connects like a supervisor: one channel, `hs` as the handshake, then the controller's answer.
FakeRank connect_as(const Endpoint& to, const Handshake& hs) {
  FakeRank r{connect_tcp(to, seconds(5)), {}};
  write_frame(r.fd.get(), encode_handshake(hs));
  FrameReader reader;
  if (auto frame = read_frame(r.fd.get(), reader, 10000)) r.welcome = decode_welcome(*frame);
  return r;
}

struct ListenerFixture : ::testing::Test {
  std::vector<std::string> refused;
  RankListener listener{Endpoint{"127.0.0.1", 0}, make_token(),
                        [this](const std::string& line) { refused.push_back(line); }};

  Handshake good(int rank, Channel ch, uint64_t world = 5, int size = 2) {
    return Handshake{listener.token(), world, rank, size, ch, "here", 1};
  }
  // Connects every channel of every rank of a world of `size` from threads.
  std::vector<std::future<FakeRank>> whole_world(uint64_t world, int size) {
    std::vector<std::future<FakeRank>> out;
    for (int r = 0; r < size; ++r) {
      for (Channel ch : {Channel::supervisor, Channel::control, Channel::out, Channel::err}) {
        out.push_back(std::async(std::launch::async, [=, this] {
          return connect_as(listener.bound(), good(r, ch, world, size));
        }));
      }
    }
    return out;
  }
  std::vector<AcceptedRank> accept(uint64_t world, int size, milliseconds within) {
    return listener.accept_world(
        world, size, std::chrono::steady_clock::now() + within,
        [](int r) {
          return RankListener::Env{{"CPRR_RANK", std::to_string(r)}};
        },
        [] {});
  }
};

TEST_F(ListenerFixture, AcceptsEveryChannelOfEveryRankAndWelcomesTheSupervisorWithItsEnv) {
  auto clients = whole_world(5, 2);
  const auto ranks = accept(5, 2, seconds(10));
  ASSERT_EQ(ranks.size(), 2u);
  for (const AcceptedRank& r : ranks) {
    EXPECT_TRUE(r.control && r.out && r.err && r.supervisor);
    EXPECT_EQ(r.host, "here");
  }
  for (auto& c : clients) {
    const FakeRank f = c.get();
    EXPECT_EQ(f.welcome.error, "");
  }
  EXPECT_EQ(listener.refused_count(), 0);
  EXPECT_TRUE(refused.empty());
}

TEST_F(ListenerFixture, WrongTokenIsRefusedReportedAndNeverPartOfTheWorld) {
  Handshake bad = good(0, Channel::control);
  bad.token = make_token();
  auto impostor = std::async(std::launch::async, [&] { return connect_as(listener.bound(), bad); });
  // The impostor comes first (the world's own ranks a little later); the world still needs all
  // its own channels.
  auto clients = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(500));
    return whole_world(5, 2);
  });
  const auto ranks = accept(5, 2, seconds(10));
  EXPECT_NE(impostor.get().welcome.error.find("wrong token"), std::string::npos);
  for (auto& c : clients.get()) EXPECT_EQ(c.get().welcome.error, "");
  EXPECT_EQ(listener.refused_count(), 1);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("refused a rank connection from 127.0.0.1:"), std::string::npos)
      << refused[0];
  EXPECT_NE(refused[0].find("wrong token"), std::string::npos) << refused[0];
}

TEST_F(ListenerFixture, OtherWorldAndRankOutsideTheWorldAreRefused) {
  std::vector<std::future<FakeRank>> bad;
  const std::vector<Handshake> wrong{good(0, Channel::control, 4), good(2, Channel::control),
                                     good(0, Channel::control, 5, 3)};
  for (const Handshake& hs : wrong) {
    bad.push_back(
        std::async(std::launch::async, [&, hs] { return connect_as(listener.bound(), hs); }));
  }
  EXPECT_THROW(accept(5, 2, milliseconds(700)), Error);  // nobody of world 5 connected
  for (auto& b : bad) {
    EXPECT_NE(b.get().welcome.error.find("is not a rank of the starting world"), std::string::npos);
  }
  EXPECT_EQ(listener.refused_count(), 3);
}

TEST_F(ListenerFixture, ADuplicateChannelIsRefusedAndTheFirstKept) {
  // Rank 0 opens its control channel twice; rank 1 comes later, so both copies are read while
  // the world is still incomplete.
  std::vector<std::future<FakeRank>> clients;
  for (Channel ch :
       {Channel::supervisor, Channel::control, Channel::out, Channel::err, Channel::control}) {
    clients.push_back(std::async(std::launch::async,
                                 [=, this] { return connect_as(listener.bound(), good(0, ch)); }));
  }
  for (Channel ch : {Channel::supervisor, Channel::control, Channel::out, Channel::err}) {
    clients.push_back(std::async(std::launch::async, [=, this] {
      std::this_thread::sleep_for(milliseconds(500));
      return connect_as(listener.bound(), good(1, ch));
    }));
  }
  const auto ranks = accept(5, 2, seconds(10));
  int refused_dups = 0;
  for (auto& c : clients) {
    const std::string why = c.get().welcome.error;
    if (!why.empty()) {
      EXPECT_NE(why.find("duplicate control connection for rank 0"), std::string::npos) << why;
      ++refused_dups;
    }
  }
  EXPECT_EQ(refused_dups, 1);
  EXPECT_EQ(listener.refused_count(), 1);
  EXPECT_TRUE(ranks[0].control && ranks[1].control);
}

TEST_F(ListenerFixture, GarbageAndOldVersionsAreRefusedWithoutHarm) {
  auto garbage = std::async(std::launch::async, [&] {
    UniqueFd fd = connect_tcp(listener.bound(), seconds(5));
    write_frame(fd.get(), "GET / HTTP/1.1\r\n\r\n");
    FrameReader reader;
    const auto frame = read_frame(fd.get(), reader, 10000);
    return frame ? decode_welcome(*frame).error : std::string("closed");
  });
  auto huge = std::async(std::launch::async, [&] {
    UniqueFd fd = connect_tcp(listener.bound(), seconds(5));
    const uint32_t len = 1u << 30;  // a length field no handshake has
    ::write(fd.get(), &len, 4);
    FrameReader reader;
    const auto frame = read_frame(fd.get(), reader, 10000);
    return frame ? decode_welcome(*frame).error : std::string("closed");
  });
  auto old = std::async(std::launch::async, [&] {
    UniqueFd fd = connect_tcp(listener.bound(), seconds(5));
    std::string hs = encode_handshake(good(0, Channel::control));
    hs[4] = static_cast<char>(kProtocolVersion - 1);  // the raw version after the magic
    write_frame(fd.get(), hs);
    FrameReader reader;
    const auto frame = read_frame(fd.get(), reader, 10000);
    return frame ? decode_welcome(*frame).error : std::string("closed");
  });
  EXPECT_THROW(accept(5, 1, milliseconds(700)), Error);
  EXPECT_NE(garbage.get().find("magic"), std::string::npos);
  EXPECT_NE(huge.get().find("no handshake"), std::string::npos);
  EXPECT_NE(old.get().find(fmt::format("speaks protocol version {}", kProtocolVersion - 1)),
            std::string::npos);
  EXPECT_EQ(listener.refused_count(), 3);
}

TEST_F(ListenerFixture, TimeoutNamesTheMissingRanksAndCheckCanGiveUp) {
  auto clients = std::async(std::launch::async, [&] {
    std::vector<FakeRank> out;
    for (Channel ch : {Channel::supervisor, Channel::control, Channel::out, Channel::err}) {
      out.push_back(connect_as(listener.bound(), good(0, ch)));
    }
    return out;
  });
  try {
    accept(5, 2, milliseconds(1500));
    ADD_FAILURE() << "a world with rank 1 missing was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1 of world 5 did not connect back"),
              std::string::npos)
        << e.what();
  }
  clients.get();
  EXPECT_THROW(
      listener.accept_world(
          9, 1, std::chrono::steady_clock::now() + seconds(30),
          [](int) { return RankListener::Env{}; }, [] { CPRR_THROW("the launcher exited"); }),
      Error);
}

}  // namespace
}  // namespace cprr

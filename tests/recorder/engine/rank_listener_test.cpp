// The listener that authenticates every connection of node agents and launched ranks: a world's
// four channels per rank, and one connection per node agent, are accepted; a wrong token,
// version, world, rank, node, a duplicate, or an agent where a rank is expected (and the other way
// round) is refused and reported.
#include "recorder/engine/rank_listener.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "data/text_forms.h"
#include "recorder/launch/tcp.h"
#include "recorder/launch/token.h"
#include "recorder/protocol/protocol.h"
#include "runtime/error.h"

namespace cprr {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

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
  std::shared_future<FakeRank> impostor =
      std::async(std::launch::async, [&] { return connect_as(listener.bound(), bad); }).share();
  // The impostor comes first: the world's own ranks connect once it was refused; the world
  // still needs all its own channels.
  auto clients = std::async(std::launch::async, [&, impostor] {
    impostor.wait();
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
  // Rank 1 connects once all five of rank 0's were answered (each is welcomed or refused as it
  // is read): the duplicate was read while the world was still incomplete.
  std::vector<std::shared_future<FakeRank>> rank0;
  for (auto& c : clients) rank0.push_back(c.share());
  clients.clear();
  const auto all_answered = [rank0] {
    for (const auto& c : rank0) {
      if (c.wait_for(seconds(60)) != std::future_status::ready) return false;
    }
    return true;
  };
  std::shared_future<bool> rank0_answered = std::async(std::launch::async, all_answered).share();
  for (Channel ch : {Channel::supervisor, Channel::control, Channel::out, Channel::err}) {
    clients.push_back(std::async(std::launch::async, [=, this] {
      rank0_answered.wait();
      return connect_as(listener.bound(), good(1, ch));
    }));
  }
  const auto ranks = accept(5, 2, seconds(120));
  EXPECT_TRUE(rank0_answered.get()) << "rank 0's connections were not all answered in a minute";
  int refused_dups = 0;
  for (auto& c : clients) rank0.push_back(c.share());
  for (auto& c : rank0) {
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

// Connects with `hs` once `after` was answered: the listener reads them in that order.
std::shared_future<FakeRank> connect_after(const Endpoint& to, const Handshake& hs,
                                           std::shared_future<FakeRank> after) {
  return std::async(std::launch::async,
                    [to, hs, after] {
                      if (after.valid()) after.wait();
                      return connect_as(to, hs);
                    })
      .share();
}

TEST_F(ListenerFixture, EachNodeAgentIsAcceptedOnceAndWelcomedWithTheTemplateEnvironment) {
  const RankListener::Env env{{"NCCL_NVLS_ENABLE", "0"}, {"USER_VAR", "x"}};
  Handshake wrong_token = good(0, Channel::agent, 0, 2);
  wrong_token.token = make_token();
  // An impostor, a rank where agents are expected, a node outside the run, then the two agents:
  // each connects once the one before was answered.
  std::vector<std::shared_future<FakeRank>> chain;
  for (const Handshake& hs :
       {wrong_token, good(0, Channel::control, 0, 2), good(2, Channel::agent, 0, 2),
        good(1, Channel::agent, 0, 2), good(0, Channel::agent, 0, 2)}) {
    chain.push_back(connect_after(listener.bound(), hs,
                                  chain.empty() ? std::shared_future<FakeRank>() : chain.back()));
  }
  const auto accepted =
      listener.accept_agents(2, std::chrono::steady_clock::now() + seconds(60), env, [] {});
  ASSERT_EQ(accepted.size(), 2u);
  for (const AcceptedAgent& a : accepted) {
    EXPECT_TRUE(a.fd);
    EXPECT_EQ(a.host, "here");
  }
  EXPECT_NE(chain[0].get().welcome.error.find("wrong token"), std::string::npos);
  EXPECT_NE(chain[1].get().welcome.error.find("a rank of world 0"), std::string::npos)
      << chain[1].get().welcome.error;
  EXPECT_NE(chain[2].get().welcome.error.find("not one of the run's 2 node agents"),
            std::string::npos);
  for (int k : {3, 4}) {
    EXPECT_EQ(chain[k].get().welcome.error, "");
    EXPECT_EQ(chain[k].get().welcome.env, env);
  }
  EXPECT_EQ(listener.refused_count(), 3);
}

TEST_F(ListenerFixture, AnAgentIsNoRankOfAWorldAndASecondAgentForANodeIsRefused) {
  const auto late_agent = connect_after(listener.bound(), good(0, Channel::agent, 0, 1), {});
  auto clients = std::async(std::launch::async, [&, late_agent] {
    late_agent.wait();
    return whole_world(5, 1);
  });
  accept(5, 1, seconds(60));
  for (auto& c : clients.get()) EXPECT_EQ(c.get().welcome.error, "");
  EXPECT_NE(late_agent.get().welcome.error.find("agent 0 of world 0"), std::string::npos)
      << late_agent.get().welcome.error;

  const auto first = connect_after(listener.bound(), good(0, Channel::agent, 0, 2), {});
  const auto second = connect_after(listener.bound(), good(0, Channel::agent, 0, 2), first);
  const auto node1 = connect_after(listener.bound(), good(1, Channel::agent, 0, 2), second);
  listener.accept_agents(2, std::chrono::steady_clock::now() + seconds(60), {}, [] {});
  EXPECT_EQ(first.get().welcome.error, "");
  EXPECT_NE(second.get().welcome.error.find("a second agent for node 0"), std::string::npos);
  EXPECT_EQ(node1.get().welcome.error, "");
}

}  // namespace
}  // namespace cprr

// The rank's end of the control channel: its watchdog thread answers status queries and handles
// Abort itself (the main thread may be stuck in a case), and queues everything else in order.
#include "recorder/rank/rank_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace cprr {
namespace {

struct Pair {
  UniqueFd controller;
  UniqueFd rank;
};

Pair socket_pair() {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  return Pair{UniqueFd(sv[0]), UniqueFd(sv[1])};
}

TEST(RankChannel, WatchdogAnswersStatusAndAbortsWhileCommandsQueueInOrder) {
  Pair p = socket_pair();
  std::atomic<int> aborts{0};
  RankChannel channel(std::move(p.rank));
  channel.start(RankChannel::Watchdog{[] {
                                        WatchdogStatus s;
                                        s.phase = "body";
                                        s.running = {"stream 1 (comm): all_reduce #3"};
                                        return s;
                                      },
                                      [&aborts] { ++aborts; }});
  write_frame(p.controller.get(), encode(ToRank{Bootstrap{"rank0-id"}}));
  write_frame(p.controller.get(), encode(ToRank{StatusQuery{42}}));
  write_frame(p.controller.get(), encode(ToRank{Abort{}}));
  write_frame(p.controller.get(), encode(ToRank{Shutdown{}}));

  FrameReader reader;
  const auto frame = read_frame(p.controller.get(), reader, 5000);
  ASSERT_TRUE(frame.has_value());
  const FromRank reply = decode_from_rank(*frame);
  ASSERT_TRUE(std::holds_alternative<WatchdogStatus>(reply));
  EXPECT_EQ(std::get<WatchdogStatus>(reply).execution, 42u);  // idle status names the query's case
  EXPECT_EQ(std::get<WatchdogStatus>(reply).phase, "body");

  const ToRank first = channel.next();
  ASSERT_TRUE(std::holds_alternative<Bootstrap>(first));
  EXPECT_EQ(std::get<Bootstrap>(first).comm_id, "rank0-id");
  EXPECT_TRUE(std::holds_alternative<Shutdown>(channel.next()));  // Abort was never queued
  EXPECT_EQ(aborts.load(), 1);
}

TEST(RankChannel, ControllerGoneReadsAsShutdown) {
  Pair p = socket_pair();
  RankChannel channel(std::move(p.rank));
  channel.start(RankChannel::Watchdog{[] { return WatchdogStatus{}; }, [] {}});
  p.controller = UniqueFd();
  EXPECT_TRUE(std::holds_alternative<Shutdown>(channel.next()));
}

}  // namespace
}  // namespace cprr

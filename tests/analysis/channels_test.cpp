// Collectives per group and messages per channel (analysis/channels.h) through every check that
// lines logs up across ranks: the mismatch checks (post-mortem and live), the hang diagnosis and
// a failed rank's leftovers. Logs of a 2x2 mesh at W=4: tp groups 1 = {0,1} and 2 = {2,3}, dp
// groups 3 = {0,2} and 4 = {1,3}; each group and channel numbers its own calls from 0.
#include "analysis/channels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analysis/classify.h"
#include "analysis/hang_diagnosis.h"
#include "analysis/layout_check.h"
#include "tests/analysis/rank_reports.h"

namespace cprr {
namespace {

using namespace rank_reports;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kTp1 = 0b0011, kTp2 = 0b1100, kDp3 = 0b0101, kDp4 = 0b1010;

CollectiveRecord in_group(uint32_t group, uint64_t members, uint64_t seq, const char* kind,
                          uint64_t bytes, const char* where = "") {
  CollectiveRecord c{seq, kind, 0, DType::f32, bytes, -1, ReduceOp::sum, group, members};
  c.where = where;
  return c;
}

CollectiveRecord message(const char* kind, int peer, uint64_t seq, uint64_t bytes,
                         const char* where = "") {
  CollectiveRecord c{seq, kind, -1, DType::f32, bytes, -1, ReduceOp::sum, 0, 0, peer};
  c.where = where;
  return c;
}

using Calls = std::vector<CollectiveRecord>;

TEST(Channels, EachGroupAndDirectionNumbersItsOwn) {
  EXPECT_EQ(channel_of(in_group(2, kTp2, 5, "all_reduce", 4), 3), (CallChannel{2, -1, -1, kTp2}));
  EXPECT_EQ(channel_of(message("send", 2, 0, 4), 1), (CallChannel{0, 1, 2}));
  EXPECT_EQ(channel_of(message("recv", 1, 0, 4), 2), (CallChannel{0, 1, 2}));
  const Calls log{in_group(1, kTp1, 0, "all_reduce", 4), message("send", 1, 0, 4),
                  in_group(1, kTp1, 1, "all_reduce", 4), message("send", 1, 1, 4)};
  EXPECT_EQ(reached(log, 0, CallChannel{1, -1, -1, kTp1}), 2u);
  EXPECT_EQ(reached(log, 0, CallChannel{0, 0, 1}), 2u);
  EXPECT_EQ(reached(log, 0, CallChannel{0, 1, 0}), 0u) << "what it received is another direction";
  EXPECT_EQ(reached(log, 0, CallChannel{}), 0u);
}

TEST(Channels, MembersComeFromTheRecordOrFromTheLogs) {
  EXPECT_EQ(members_of(in_group(3, kDp3, 0, "x", 0), 4, {}), (std::vector<int>{0, 2}));
  EXPECT_EQ(members_of(in_group(0, 0, 0, "x", 0), 3, {}), (std::vector<int>{0, 1, 2}));
  // Unrecorded members (a world of over 64 ranks): the ranks whose logs use the group.
  const Calls a{in_group(7, 0, 0, "x", 0)}, b{in_group(0, 0, 0, "x", 0)};
  EXPECT_EQ(members_of(a.front(), 3, {&a, &b, &a}), (std::vector<int>{0, 2}));
}

TEST(Channels, PhrasesNameTheGroupTheChannelAndTheLine) {
  EXPECT_EQ(call_phrase(in_group(0, 0, 3, "all_reduce", 4)), "collective #3 (all_reduce)");
  EXPECT_EQ(call_phrase(in_group(2, kTp2, 3, "all_gather", 4, "tp.py:9"), true),
            "collective #3 (all_gather) of group 2 at tp.py:9");
  EXPECT_EQ(call_phrase(message("recv", 0, 2, 4)), "recv #2 from rank 0");
  const std::vector<GroupRecord> named{{2, {2, 3}, "gloo", "tp"}};
  EXPECT_EQ(group_phrase(2, {nullptr, &named}), "group 2 (tp, ranks 2,3)");
  EXPECT_EQ(group_phrase(4, {&named}, kDp4), "group 4 (ranks 1,3)");
  EXPECT_EQ(group_phrase(4, {&named}), "group 4");
  EXPECT_EQ(group_phrase(0, {&named}), "");
}

// Each rank's log of a healthy mesh step: tp all-gather, dp all-reduce, each #0 of its group.
std::vector<Calls> mesh_logs() {
  std::vector<Calls> logs(4);
  for (int r = 0; r < 4; ++r) {
    const bool low = r < 2;
    logs[r] = {in_group(low ? 1 : 2, low ? kTp1 : kTp2, 0, "all_gather", 256),
               in_group(r % 2 == 0 ? 3 : 4, r % 2 == 0 ? kDp3 : kDp4, 0, "all_reduce", 512)};
  }
  return logs;
}

std::vector<const Calls*> ptrs(const std::vector<Calls>& logs) {
  std::vector<const Calls*> out;
  for (const Calls& l : logs) out.push_back(&l);
  return out;
}

TEST(GroupChecks, GroupsNumberingFromZeroEachAreNoMismatch) {
  const std::vector<Calls> logs = mesh_logs();
  EXPECT_FALSE(check_collective_logs(ptrs(logs), true).has_value());
}

TEST(GroupChecks, GroupsOneCallMadeUnderOneNumberAreToldApartByTheirMembers) {
  // A library that numbers the groups of one split alike: tp {0,1} and {2,3} both "group 1".
  std::vector<Calls> logs(4);
  for (int r = 0; r < 4; ++r) {
    logs[r] = {in_group(1, r < 2 ? kTp1 : kTp2, 0, "all_reduce", r < 2 ? 64 : 128)};
  }
  EXPECT_FALSE(check_collective_logs(ptrs(logs), true).has_value())
      << "each group's calls agree within it";
  const std::vector<GroupRecord> split{{1, {0, 1}, "nccl", "mesh_tp"},
                                       {1, {2, 3}, "nccl", "mesh_tp"}};
  EXPECT_EQ(group_phrase(1, {&split}, kTp2), "group 1 (mesh_tp, ranks 2,3)");
}

TEST(GroupChecks, AMismatchInsideOneGroupNamesItsNumberAndRanks) {
  std::vector<Calls> logs = mesh_logs();
  logs[3][0].bytes = 192;
  logs[3][0].where = "tp.py:12";
  logs[2][0].where = "tp.py:12";
  const auto m = check_collective_logs(ptrs(logs), true);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->group, 2u);
  EXPECT_EQ(m->describe(),
            "collective #0 (all_gather): rank 2 has bytes 256, rank 3 has bytes 192 (rank 2 at "
            "tp.py:12, rank 3 at tp.py:12)");
  CaseCapture caps[4];
  for (int r = 0; r < 4; ++r) caps[r].collectives = logs[r];
  caps[2].groups = {{2, {2, 3}, "gloo", "tp"}};
  const auto named = check_collectives({&caps[0], &caps[1], &caps[2], &caps[3]});
  ASSERT_TRUE(named.has_value());
  EXPECT_THAT(named->describe(), ::testing::StartsWith("group 2 (tp, ranks 2,3): collective #0"));
}

TEST(GroupChecks, AMemberThatSkippedItsGroupsCollectiveIsACountMismatch) {
  std::vector<Calls> logs = mesh_logs();
  logs[3].pop_back();  // rank 3 never called dp group 4's all_reduce
  const auto m = check_collective_logs(ptrs(logs), true);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->field, "count");
  EXPECT_EQ(m->group, 4u);
  EXPECT_EQ(std::make_pair(m->rank_a, m->rank_b), std::make_pair(1, 3));
  EXPECT_FALSE(check_collective_logs(ptrs(logs), false).has_value()) << "a log cut short";
}

TEST(GroupChecks, ASendIsMatchedWithItsRecvBySize) {
  std::vector<Calls> logs(2);
  logs[0] = {message("send", 1, 0, 64), message("send", 1, 1, 64, "stage.py:10")};
  logs[1] = {message("recv", 0, 0, 64), message("recv", 0, 1, 32, "stage.py:20")};
  const auto m = check_collective_logs(ptrs(logs), true);
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->p2p);
  EXPECT_EQ(m->describe(),
            "message #1 from rank 0 to rank 1: rank 0 sends bytes 64, rank 1 receives bytes 32 "
            "(rank 0 at stage.py:10, rank 1 at stage.py:20)");
  logs[1][1].bytes = 64;
  EXPECT_FALSE(check_collective_logs(ptrs(logs), true).has_value());
  logs[1].pop_back();
  const auto count = check_collective_logs(ptrs(logs), true);
  ASSERT_TRUE(count.has_value());
  EXPECT_EQ(count->describe(), "rank 0 sent 2 message(s) to rank 1, which received 1");
}

TEST(GroupChecks, ALiveMismatchNeedsOnlyTheGroupsMembersBlockedInIt) {
  // Ranks 2 and 3 are blocked in tp group 2's #0 with other sizes; ranks 0 and 1 finished.
  const Calls r2{in_group(2, kTp2, 0, "all_reduce", 512)},
      r3{in_group(2, kTp2, 0, "all_reduce", 384)};
  const auto m = blocked_mismatch({nullptr, nullptr, &r2, &r3});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->group, 2u);
  EXPECT_EQ(m->field, "bytes");
  // One member still on its way: no decision.
  const Calls before{in_group(3, kDp3, 0, "all_reduce", 8)};
  EXPECT_FALSE(blocked_mismatch({nullptr, nullptr, &r2, &before}).has_value());
  // The world's collectives still need every rank.
  const Calls w0{in_group(0, 0, 4, "all_reduce", 8)}, w1{in_group(0, 0, 4, "all_reduce", 4)};
  EXPECT_FALSE(blocked_mismatch({&w0, &w1, nullptr}).has_value());
  EXPECT_TRUE(blocked_mismatch({&w0, &w1}).has_value());
}

CollectiveRecord all_to_all(uint64_t seq, std::vector<uint64_t> sends,
                            std::vector<uint64_t> recvs) {
  CollectiveRecord c = in_group(0, 0, seq, "all_to_all_v", 0, "moe.py:9");
  for (uint64_t b : sends) c.bytes += b;
  c.send_bytes = std::move(sends);
  c.recv_bytes = std::move(recvs);
  c.row_bytes = 512;
  return c;
}

TEST(GroupChecks, AnUnevenAllToAllIsComparedPerPeer) {
  // Rank 0 sends 14 rows to rank 1, which expects 6; sizes may differ freely otherwise.
  std::vector<Calls> logs{{all_to_all(0, {1024, 14 * 512}, {1024, 2048})},
                          {all_to_all(0, {2048, 512}, {6 * 512, 512})}};
  auto m = check_collective_logs(ptrs(logs), true);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->describe(),
            "collective #0 (all_to_all_v): rank 0 sends 14 rows (7168 bytes) to rank 1, rank 1 "
            "expects 6 rows (3072 bytes) (rank 0 at moe.py:9, rank 1 at moe.py:9)");
  EXPECT_TRUE(blocked_mismatch(ptrs(logs)).has_value()) << "no transport completes it";
  logs[1][0].recv_bytes[0] = 14 * 512;
  EXPECT_FALSE(check_collective_logs(ptrs(logs), true).has_value());
  EXPECT_FALSE(blocked_mismatch(ptrs(logs)).has_value());
  // Not in rows: told in bytes.
  logs[1][0].recv_bytes[0] = 100;
  logs[0][0].row_bytes = 0;
  m = check_collective_logs(ptrs(logs), true);
  ASSERT_TRUE(m.has_value());
  EXPECT_THAT(m->describe(), HasSubstr("rank 0 sends 7168 bytes to rank 1, rank 1 expects 100 "
                                       "bytes"));
}

RankReport stuck_in(Calls entered) {
  RankReport rep = waiting("body", 0, "x", -1);
  rep.entered = std::move(entered);
  return rep;
}

RankReport finished_with(Calls log) {
  RankReport rep = passed();
  rep.done->capture.collectives = std::move(log);
  return rep;
}

TEST(GroupHang, NamesTheGroupAndTheMemberThatNeverJoined) {
  std::vector<Calls> logs = mesh_logs();
  Calls r1 = logs[1];
  r1.push_back(in_group(4, kDp4, 1, "all_reduce", 512, "dp.py:7"));
  const std::string d = diagnose_hang(
      {finished_with(logs[0]), stuck_in(r1), finished_with(logs[2]), finished_with(logs[3])});
  EXPECT_THAT(d, HasSubstr("group 4 (ranks 1,3): rank 3 never joined collective #1 (all_reduce) "
                           "at dp.py:7"));
  EXPECT_THAT(d, HasSubstr("rank 1: in body (waiting in collective #0 x), last collective #1 "
                           "(all_reduce) of group 4 at dp.py:7"));
  EXPECT_THAT(d, Not(HasSubstr("rank 0 never joined"))) << "rank 0 is not in group 4";
}

TEST(GroupHang, ARecvNeverSentNamesBothRanksTheNumberAndTheLine) {
  const Calls sender{message("send", 1, 0, 8), message("send", 1, 1, 8)};
  const Calls receiver{message("recv", 0, 0, 8), message("recv", 0, 1, 8),
                       message("recv", 0, 2, 8, "stage.py:41")};
  const std::string d = diagnose_hang({finished_with(sender), stuck_in(receiver)});
  EXPECT_THAT(d, HasSubstr("rank 1 blocked in recv #2 from rank 0 at stage.py:41; rank 0 sent 2"));
  EXPECT_THAT(d, Not(HasSubstr("never joined")));
}

TEST(GroupHang, AStreamOrderedRecvIsFoundBehindWhatWasIssuedAfterIt) {
  // A C++ case issues on its stream: rank 1's recv #1 from 0 is followed in its flight record by
  // its send #1 to rank 2, which rank 2 is waiting for; only the recv never sent is the cause.
  const Calls r0{message("send", 1, 0, 8)};
  const Calls r1{message("recv", 0, 0, 8), message("send", 2, 0, 8), message("recv", 0, 1, 8),
                 message("send", 2, 1, 8)};
  const Calls r2{message("recv", 1, 0, 8), message("recv", 1, 1, 8)};
  const std::string d = diagnose_hang({finished_with(r0), stuck_in(r1), stuck_in(r2)});
  EXPECT_THAT(d, HasSubstr("rank 1 blocked in recv #1 from rank 0; rank 0 sent 1"));
  EXPECT_THAT(d, Not(HasSubstr("rank 2 blocked"))) << "rank 1 did issue its send #1";
}

TEST(GroupFailure, OnlyWhatTheFailedRankTakesPartInIsLeftByIt) {
  // Rank 3 failed after tp group 2's #0; rank 0 waits in dp group 3's #0 (rank 3 is not in it)
  // and rank 1 in dp group 4's #0 (it is).
  RankReport failed3 = failed("ValueError: x");
  failed3.done->capture.collectives = {in_group(2, kTp2, 0, "all_gather", 8)};
  const std::vector<RankReport> ranks{stuck_in({}), stuck_in({}), passed(), failed3};
  EXPECT_FALSE(left_by_failure(ranks, 0, {in_group(3, kDp3, 0, "all_reduce", 8)}).has_value());
  const auto left = left_by_failure(ranks, 1, {in_group(4, kDp4, 0, "all_reduce", 8)});
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->by, 3);
  EXPECT_EQ(call_phrase(left->call), "collective #0 (all_reduce) of group 4");
  // A recv from the failed rank past what it sent; one from another rank is not its doing.
  EXPECT_TRUE(left_by_failure(ranks, 2, {message("recv", 3, 0, 8)}).has_value());
  EXPECT_FALSE(left_by_failure(ranks, 2, {message("recv", 0, 0, 8)}).has_value());
}

TEST(LoneReturn, WhatARankThatReturnedNeverEnteredIsLeftByIt) {
  // Rank 3 returned after tp group 2's #0; rank 1 waits in dp group 4's #0, which rank 3 is in,
  // and rank 0 in dp group 3's #0, which it is not. Rank 2 failed: a failure is not a return.
  const std::vector<RankReport> ranks{stuck_in({}), stuck_in({}), failed("ValueError: x"),
                                      finished_with({in_group(2, kTp2, 0, "all_gather", 8)})};
  const auto left =
      left_by_return(ranks, 1, {in_group(4, kDp4, 0, "all_reduce", 8, "train.py:12")});
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->by, 3);
  EXPECT_EQ(call_phrase(left->call, true), "collective #0 (all_reduce) of group 4 at train.py:12");
  EXPECT_FALSE(left_by_return(ranks, 0, {in_group(3, kDp3, 0, "all_reduce", 8)}).has_value());
  // What the returned rank did enter is not left: tp group 2's #0 completes with rank 3.
  EXPECT_FALSE(left_by_return(ranks, 2, {in_group(2, kTp2, 0, "all_gather", 8)}).has_value());
  // A message: a recv from the returned rank past what it sent; not one from another rank.
  EXPECT_TRUE(left_by_return(ranks, 1, {message("recv", 3, 0, 8)}).has_value());
  EXPECT_FALSE(left_by_return(ranks, 1, {message("recv", 0, 0, 8)}).has_value());
  // The failed rank is left_by_failure's, never a return.
  EXPECT_FALSE(left_by_return(ranks, 0, {message("recv", 2, 0, 8)}).has_value());
  EXPECT_TRUE(left_by_failure(ranks, 0, {message("recv", 2, 0, 8)}).has_value());
  // A call rank 3 entered and that raised is out of its collective log (a case it ended clean)
  // but in its flight record: not left by it.
  const Calls flight3{in_group(2, kTp2, 0, "all_gather", 8), in_group(4, kDp4, 0, "all_reduce", 8)};
  const std::vector<const Calls*> flights{nullptr, nullptr, nullptr, &flight3};
  EXPECT_FALSE(
      left_by_return(ranks, 1, {in_group(4, kDp4, 0, "all_reduce", 8)}, &flights).has_value());
  const std::vector<const Calls*> no_flight3{nullptr, nullptr, nullptr, nullptr};
  EXPECT_TRUE(
      left_by_return(ranks, 1, {in_group(4, kDp4, 0, "all_reduce", 8)}, &no_flight3).has_value());
}

TEST(GroupFailure, AFailureInACallAPeerReturnedWithoutIsNoted) {
  // Rank 1 raised (a transport error) in dp group 4's #1, which rank 3 skipped and returned.
  RankReport failed1 = failed("RuntimeError: Connection closed by peer");
  failed1.done->capture.collectives = {in_group(4, kDp4, 0, "all_reduce", 8),
                                       in_group(4, kDp4, 1, "all_reduce", 8, "dp.py:9")};
  const std::vector<RankReport> ranks{finished_with({in_group(3, kDp3, 0, "all_reduce", 8)}),
                                      failed1,
                                      finished_with({in_group(3, kDp3, 0, "all_reduce", 8)}),
                                      finished_with({in_group(4, kDp4, 0, "all_reduce", 8)})};
  EXPECT_EQ(classify(ranks, false).note,
            "rank 1 had entered collective #1 (all_reduce) of group 4 at dp.py:9, which rank 3 "
            "never entered: it returned without it");
  // Rank 3 took part: nothing to say.
  RankReport joined =
      finished_with({in_group(4, kDp4, 0, "all_reduce", 8), in_group(4, kDp4, 1, "all_reduce", 8)});
  EXPECT_EQ(classify({ranks[0], failed1, ranks[2], joined}, false).note, "");
}

}  // namespace
}  // namespace cprr

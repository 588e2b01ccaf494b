// Context::split in a world of one (the cpu backend): a split is a world collective numbered
// among the world's, on the host; its group numbers its own collectives and messages, records
// its members and what made it, and runs its collectives (a group of one copies locally); a rank
// that voted no color gets a Group every call on which says so. The multi-rank paths (Gloo
// contexts of the members, NCCL's ncclCommSplit) are tests/commands/record_groups_test.cpp and
// the GPU corpus.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/corpus_kernels.h"
#include "runtime/backend.h"
#include "tests/recorder/api/context_support.h"

namespace cprr {
namespace {

using test::case_failure_of;
using test::make_state;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ContextGroups, ASplitIsAHostCollectiveOfTheWorldAndItsGroupNumbersItsOwnCalls) {
  RankState st = make_state();
  CaseCapture cap;
  {
    Context ctx(st, "unit/groups", {}, 1, Placement::best_fit);
    const Stream s = ctx.stream();
    const Buffer in = ctx.alloc("in", 64 * 4), out = ctx.alloc("out", 64 * 4);
    ctx.launch(s, "fill", 64, kernels::FillConst<float>{in.as<float>(), 7.0f}, Access{{}, {in}});
    ctx.barrier(s);
    const Group g = ctx.split(5);
    ASSERT_TRUE(g.member());
    EXPECT_EQ(g.id(), 1u);
    EXPECT_EQ(g.rank(), 0);
    EXPECT_EQ(g.size(), 1);
    EXPECT_EQ(g.world_rank(0), 0);
    g.all_reduce(s, in, DType::f32);
    g.all_gather(s, in, out, DType::f32);  // a group of one: a local copy
    g.broadcast(s, in, DType::f32, 0);
    EXPECT_THAT(case_failure_of([&] { g.broadcast(s, in, DType::f32, 1); }), HasSubstr("root 1"));
    EXPECT_THAT(case_failure_of([&] { g.send(s, 0, in, DType::f32); }),
                HasSubstr("rank 0 of group 1 (1 ranks) has peers 0..0 but itself"));
    EXPECT_THAT(case_failure_of([&] { (void)g.world_rank(1); }),
                HasSubstr("rank 1 is not a rank of group 1"));
    const Group second = ctx.split(0);  // ids go on: a second split's group is another
    EXPECT_EQ(second.id(), 2u);
    ctx.barrier(s);
    EXPECT_EQ(ctx.read<float>(s, out), std::vector<float>(64, 7.0f));
    ctx.drain();
    cap = ctx.finish();
  }
  std::vector<std::string> calls;
  for (const CollectiveRecord& c : cap.collectives) {
    calls.push_back(fmt::format("{}:{}#{}@{}", c.group, c.kind, c.seq, c.stream));
  }
  // The world's: barrier #0, split #1, split #2, barrier #3; group 1's own #0..#2.
  EXPECT_THAT(calls,
              ElementsAre("0:barrier#0@0", "0:split#1@-1", "1:all_reduce#0@0", "1:all_gather#1@0",
                          "1:broadcast#2@0", "0:split#2@-1", "0:barrier#3@0"));
  EXPECT_EQ(cap.collectives[2].members, 0b1u);  // a group's members, the world's none
  EXPECT_EQ(cap.collectives[0].members, 0u);
  ASSERT_EQ(cap.groups.size(), 2u);
  EXPECT_EQ(cap.groups[0], (GroupRecord{1, {0}, "gloo", "split #1 color 5"}));
  EXPECT_EQ(cap.groups[1], (GroupRecord{2, {0}, "gloo", "split #2 color 0"}));
  // The split is on the host (stream -1), a collective op the happens-before check pairs.
  int host_collectives = 0;
  for (const OpRecord& op : cap.ops) {
    host_collectives += op.kind == "collective" && op.stream == -1 ? 1 : 0;
  }
  EXPECT_EQ(host_collectives, 2);
}

TEST(ContextGroups, ARankWithoutAColorGetsAGroupEveryCallOnWhichSaysSo) {
  RankState st = make_state();
  Context ctx(st, "unit/no_color", {}, 1, Placement::best_fit);
  const Group none = ctx.split(-1);
  EXPECT_FALSE(none.member());
  EXPECT_EQ(none.size(), 0);
  const Buffer b = ctx.alloc("b", 16);
  EXPECT_THAT(case_failure_of([&] { none.all_reduce(ctx.stream(), b, DType::f32); }),
              HasSubstr("all_reduce on a group this rank is not in: it split with a negative "
                        "color at split #0 (color -1)"));
  const Group next = ctx.split(3);  // the no-color split made no group, so no id went
  EXPECT_EQ(next.id(), 1u);
  ctx.drain();
  EXPECT_TRUE(ctx.finish().groups.size() == 1);
}

TEST(ContextGroups, TheWorldIsAGroupOfEveryRankWithIdZero) {
  RankState st = make_state();
  Context ctx(st, "unit/world", {}, 1, Placement::best_fit);
  EXPECT_EQ(ctx.world().id(), 0u);
  EXPECT_EQ(ctx.world().size(), 1);
  EXPECT_THAT(ctx.world().world_ranks(), ElementsAre(0));
  ctx.world().barrier(ctx.stream());
  ctx.drain();
  EXPECT_EQ(ctx.finish().collectives.at(0).kind, "barrier");
}

}  // namespace
}  // namespace cprr

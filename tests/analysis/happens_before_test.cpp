// check_happens_before on hand-built op logs: orderings that must not be reported (events recorded
// after the writer, synchronization, read-backs, collectives, stream order, disjoint bytes) and
// races that must be, named by op pair, bytes and fix (among them a write after the event its
// reader waits for, and a pinned staging buffer the host refills while a copy still reads it).
#include "analysis/happens_before.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "analysis/race_fix.h"
#include "tests/analysis/hb_log.h"

namespace cprr {
namespace {

using namespace hb_test;  // NOLINT(google-build-using-namespace): the tests' own log builder

// ---- must not report ----

TEST(HappensBefore, EventRecordedAfterTheWriterOrders) {
  Log l;
  l.kernel(1, "max_logit", {}, {kX});
  l.record(1, 0);
  l.wait(0, 0);
  l.kernel(0, "maximum", {kX}, {kY});
  l.kernel(1, "next step", {}, {kY});  // stream 1 is not ordered after stream 0: y still races
  const HbResult r = check({l});
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_EQ(pair_of(r.races[0]), Pair("0:3", "0:4"));
  EXPECT_TRUE(r.notes.empty());
}

TEST(HappensBefore, SynchronizeOfAllOrOneStreamOrdersLaterHostAndStreamOps) {
  Log l;
  l.kernel(1, "produce", {}, {kX});
  l.kernel(2, "produce y", {}, {kY});
  l.sync(-1);
  l.host("inspect", {kX, kY}, {});
  l.kernel(2, "overwrite", {}, {kX});
  l.sync(2);
  l.host("refill", {}, {kX});
  EXPECT_TRUE(check({l}).races.empty());
}

TEST(HappensBefore, HostReadBackOrdersTheHostAfterItsStream) {
  Log l;
  l.kernel(1, "produce", {}, {kX});
  l.read_back(1, kX);
  l.host("refill", {}, {kX});
  l.kernel(2, "consume", {kX}, {});
  EXPECT_TRUE(check({l}).races.empty());
}

TEST(HappensBefore, StreamOrderAndHostIssueOrderOrder) {
  Log l;
  l.host("fill", {}, {kX});
  l.copy(1, "h2d", {kX}, {kY});
  l.kernel(1, "reuse", {kY}, {kX});
  l.kernel(1, "again", {kX}, {kX, kY});
  EXPECT_TRUE(check({l}).races.empty());
}

TEST(HappensBefore, DisjointRangesOfOneBufferDoNotRace) {
  // Three slices of buffer 7: [0, 64) and [64, 128) written on two streams, [128, 192) only read.
  Log l;
  l.kernel(1, "left", {bytes(7, "qkv", 128, 192)}, {bytes(7, "qkv", 0, 64)});
  l.kernel(2, "right", {bytes(7, "qkv", 128, 192)}, {bytes(7, "qkv", 64, 128)});
  EXPECT_TRUE(check({l}).races.empty());
}

TEST(HappensBefore, SameOffsetsInOtherPoolsOrRanksDoNotRace) {
  Log r0, r1;
  r0.kernel(1, "device", {}, {bytes(1, "a", 0, 64, kDevice)});
  r0.kernel(2, "host pool", {}, {bytes(2, "b", 0, 64, kHost)});
  r1.kernel(1, "device", {}, {bytes(1, "a", 0, 64, kDevice)});
  EXPECT_TRUE(check({r0, r1}).races.empty());
}

TEST(HappensBefore, CollectiveCompletionOrdersAfterEveryRanksEntry) {
  // Rank 0 writes x on stream 1 and enters collective #0 there; its stream 2 reads x after
  // collective #1. Rank 1 runs both on one stream, so #1 cannot start on rank 1 before #0 ended
  // there, which followed rank 0's entry into #0: a path through rank 1.
  Log r0, r1;
  r0.kernel(1, "produce", {}, {kX});
  r0.collective(1, "barrier", 0);
  r0.collective(2, "barrier", 1);
  r0.kernel(2, "consume", {kX}, {});
  r1.collective(0, "barrier", 0);
  r1.collective(0, "barrier", 1);
  EXPECT_TRUE(check({r0, r1}).races.empty());

  // The same with rank 1's #1 on another stream: nothing orders it after #0, so no path.
  Log r1_split;
  r1_split.collective(0, "barrier", 0);
  r1_split.collective(3, "barrier", 1);
  const HbResult r = check({r0, r1_split});
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_EQ(pair_of(r.races[0]), Pair("0:0", "0:3"));
  EXPECT_EQ(r.races[0].fix,
            "stream 2 must wait for an event recorded after op #0 (kernel 'produce') on stream 1, "
            "before op #3 (kernel 'consume')");
}

TEST(HappensBefore, EventAfterACollectiveOrdersAfterItsCompletion) {
  Log r0, r1;
  r0.collective(1, "all_reduce", 0, {kX}, {kX});
  r0.record(1, 5);
  r0.wait(2, 5);
  r0.kernel(2, "scale", {kX}, {kX});
  r1.collective(0, "all_reduce", 0, {kX}, {kX});
  EXPECT_TRUE(check({r0, r1}).races.empty());
}

// ---- must report ----

TEST(HappensBefore, EventRecordedBeforeTheWriterIsARace) {
  // Seed 001: max_logit_per_step[1] written on cp_stream after the event the default stream
  // waits for, then read by torch.maximum on the default stream.
  Log l;
  l.record(1, 0);
  l.kernel(1, "max_logit", {}, {bytes(3, "max_logit_per_step[1]", 256, 320)});
  l.wait(0, 0);
  l.kernel(0, "maximum", {bytes(3, "max_logit_per_step[1]", 256, 320)}, {kY});
  const HbResult r = check({l});
  ASSERT_EQ(r.races.size(), 1u);
  ASSERT_EQ(r.race_count, 1u);
  const Race& race = r.races[0];
  EXPECT_EQ(race.first.describe(), "rank 0 stream 1 op #1 (kernel 'max_logit')");
  EXPECT_EQ(race.second.describe(), "rank 0 stream 0 op #3 (kernel 'maximum')");
  ASSERT_EQ(race.overlaps.size(), 1u);
  EXPECT_EQ(race.overlaps[0].begin, 256u);
  EXPECT_EQ(race.overlaps[0].end, 320u);
  EXPECT_EQ(race.overlaps[0].first_buffer, 3u);
  EXPECT_EQ(race.overlaps[0].second_buffer_name, "max_logit_per_step[1]");
  EXPECT_EQ(race.fix,
            "stream 0 must wait for an event recorded after op #1 (kernel 'max_logit') on stream "
            "1, before op #3 (kernel 'maximum')");
}

TEST(HappensBefore, AReadBeforeAnAsyncTorchCallsWorkIsWaitedForIsFixedByWaitingOnTheWork) {
  // As the Python runtime logs an async call: on a stream of its own, after what was issued.
  for (const std::string call :
       {"dist.all_reduce(async_op=True)", "dist.irecv", "dist.batch_isend_irecv"}) {
    SCOPED_TRACE(call);
    Log l;
    l.record(0, 0);
    l.wait(1, 0);
    l.kernel(1, call + " at stage.py:41", {kX}, {kX});
    l.kernel(0, "aten.sum at stage.py:42", {kX}, {});
    const HbResult r = check({l});
    ASSERT_EQ(r.races.size(), 1u);
    EXPECT_EQ(r.races[0].fix,
              "call wait() on the Work that op #2 (kernel '" + call +
                  " at stage.py:41') returned, before op #3 (kernel 'aten.sum at stage.py:42') "
                  "(in the op log: stream 0 must wait for an event recorded after op #2 (kernel '" +
                  call +
                  " at stage.py:41') on stream 1, before op #3 (kernel 'aten.sum at "
                  "stage.py:42'))");
  }
  // A blocking call returns no Work: the fix stays the ordering itself.
  Log l;
  l.kernel(1, "dist.all_reduce at stage.py:41", {kX}, {kX});
  l.kernel(0, "aten.sum at stage.py:42", {kX}, {});
  const HbResult r = check({l});
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_EQ(r.races[0].fix.rfind("stream 0 must wait for an event recorded after op #0", 0), 0u)
      << r.races[0].fix;
}

TEST(HappensBefore, WriteDuringAnInFlightCollectiveOnAnotherStreamIsARace) {
  Log r0, r1;
  r0.record(1, 0);
  r0.collective(1, "all_reduce", 0, {kX}, {kX});
  r0.wait(2, 0);  // an event from before the collective orders nothing about it
  r0.kernel(2, "scale", {}, {bytes(1, "x", 32, 96)});
  r1.collective(0, "all_reduce", 0, {kX}, {kX});
  const HbResult r = check({r0, r1});
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_EQ(pair_of(r.races[0]), Pair("0:1", "0:3"));
  EXPECT_EQ(r.races[0].overlaps[0].begin, 32u);
  EXPECT_EQ(r.races[0].overlaps[0].end, 64u);
  EXPECT_EQ(r.races[0].fix,
            "stream 2 must wait for an event recorded after op #1 (collective 'all_reduce') on "
            "stream 1, before op #3 (kernel 'scale')");
}

TEST(HappensBefore, WriteBeforeACollectiveOnAnotherStreamNamesTheCollectiveAsWaiting) {
  Log r0, r1;
  r0.kernel(2, "pack", {}, {kX});
  r0.collective(1, "all_reduce", 0, {kX}, {kX});
  r1.collective(0, "all_reduce", 0, {kX}, {kX});
  const HbResult r = check({r0, r1});
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_EQ(r.races[0].fix,
            "stream 1 must wait for an event recorded after op #0 (kernel 'pack') on stream 2, "
            "before op #1 (collective 'all_reduce')");
}

TEST(HappensBefore, HostWriteWhileACopyReadsThePinnedBufferIsARace) {
  // Seed 003: one pinned staging buffer refilled by the host for each async H2D copy.
  const ByteRange staging = bytes(4, "staging", 0, 32, kHost);
  Log l;
  l.host("fill counts", {}, {staging});
  l.copy(1, "h2d counts", {staging}, {bytes(5, "counts", 0, 32)});
  l.host("fill displs", {}, {staging});
  l.copy(1, "h2d displs", {staging}, {bytes(6, "displs", 32, 64)});
  l.host("fill sizes", {}, {staging});
  const HbResult r = check({l});
  ASSERT_EQ(r.race_count, 3u);
  EXPECT_EQ(pair_of(r.races[0]), Pair("0:1", "0:2"));
  EXPECT_EQ(pair_of(r.races[1]), Pair("0:1", "0:4"));
  EXPECT_EQ(pair_of(r.races[2]), Pair("0:3", "0:4"));
  EXPECT_EQ(r.races[0].overlaps[0].pool, kHost);
  EXPECT_EQ(r.races[0].fix,
            "the host must synchronize stream 1 after op #1 (copy 'h2d counts') before op #2 "
            "(host 'fill displs')");

  // The fix of seed 003: one staging buffer per copy.
  Log fixed;
  fixed.host("fill counts", {}, {staging});
  fixed.copy(1, "h2d counts", {staging}, {bytes(5, "counts", 0, 32)});
  fixed.host("fill displs", {}, {bytes(7, "staging 2", 32, 64, kHost)});
  fixed.copy(1, "h2d displs", {bytes(7, "staging 2", 32, 64, kHost)}, {bytes(6, "displs", 32, 64)});
  EXPECT_TRUE(check({fixed}).races.empty());
}

TEST(HappensBefore, SignalWaitOrdersAPutBeforeThePeersRead) {
  Log r0, r1;
  r0.copy(1, "put", {bytes(2, "send src", 0, 64)}, {kPutIntoRank1});
  r0.signal(1, 7, 1);
  r1.wait_signal(0, 7, 1);
  r1.kernel(0, "consume", {kWindow}, {});
  EXPECT_TRUE(check({r0, r1}).races.empty());
}

TEST(HappensBefore, SkippedSignalWaitIsACrossRankRace) {
  // Seed 003's alltoallv: rank 1 skips its wait when its receive count is 0, so its epoch lags;
  // in the next call it waits for epoch 1, which the first call's signal already satisfied, and
  // reads its window while rank 0's second put may still be landing.
  Log r0, r1;
  r0.copy(1, "put", {bytes(2, "send src", 0, 64)}, {kPutIntoRank1});
  r0.signal(1, 7, 1);
  r0.copy(1, "put", {bytes(2, "send src", 0, 64)}, {kPutIntoRank1});
  r0.signal(1, 7, 2);
  r1.wait_signal(0, 7, 1);
  r1.kernel(0, "consume", {kWindow}, {});
  const HbResult r = check({r0, r1});
  ASSERT_EQ(r.races.size(), 1u);
  const Race& race = r.races[0];
  EXPECT_EQ(race.first.describe(), "rank 0 stream 1 op #2 (copy 'put')");
  EXPECT_EQ(race.second.describe(), "rank 1 stream 0 op #1 (kernel 'consume')");
  EXPECT_EQ(race.overlaps[0].memory_rank, 1);
  EXPECT_EQ(race.overlaps[0].first_buffer_name, "send");
  EXPECT_EQ(race.overlaps[0].second_buffer_name, "recv window");
  EXPECT_EQ(race.fix,
            "on rank 1, stream 0 must wait for a signal that rank 0 sends after its op #2 (copy "
            "'put') on stream 1, before op #1 (kernel 'consume')");
}

TEST(HappensBefore, CrossRankWriterGoesFirstEvenFromAHigherRank) {
  Log r0, r1;
  r0.kernel(0, "consume", {kWindow}, {});
  r1.copy(2, "put", {}, {bytes(8, "send", 0, 64, kSymmetric, /*owner=*/0)});
  const HbResult r = check({r0, r1});
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_EQ(pair_of(r.races[0]), Pair("1:0", "0:0"));
  EXPECT_EQ(r.races[0].overlaps[0].first_buffer_name, "send");
  EXPECT_EQ(r.races[0].fix,
            "on rank 0, stream 0 must wait for a signal that rank 1 sends after its op #0 (copy "
            "'put') on stream 2, before op #0 (kernel 'consume')");
}

// ---- reporting ----

TEST(HappensBefore, OnePairOnSeveralBuffersIsOneRaceWithEveryOverlap) {
  Log l;
  l.kernel(1, "a", {kX}, {kY});
  l.kernel(2, "b", {kY}, {kX, kY});
  const HbResult r = check({l});
  ASSERT_EQ(r.races.size(), 1u);
  ASSERT_EQ(r.races[0].overlaps.size(), 2u);
  EXPECT_EQ(r.races[0].overlaps[0].first_buffer_name, "x");
  EXPECT_EQ(r.races[0].overlaps[1].first_buffer_name, "y");
}

TEST(HappensBefore, MaxRacesKeepsTheFirstAndCountsAll) {
  Log l;
  for (int i = 0; i < 4; ++i) l.kernel(i, "writer", {}, {kX});
  std::vector<RankOps> ranks{l.ops};
  const HbResult r = check_happens_before(ranks, HbOptions{.max_races = 2});
  EXPECT_EQ(r.race_count, 6u);
  ASSERT_EQ(r.races.size(), 2u);
  EXPECT_EQ(pair_of(r.races[0]), Pair("0:0", "0:1"));
  EXPECT_EQ(pair_of(r.races[1]), Pair("0:0", "0:2"));
}

TEST(HappensBefore, WaitsThatOrderNothingAreNoted) {
  Log r0;
  r0.wait(1, 42);
  r0.wait_signal(1, 3, 1);
  const HbResult r = check({r0});
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_EQ(r.notes[0],
            "rank 0 op #0 (wait 'wait') waits for event 42, which was not recorded before it: the "
            "wait orders nothing");
  EXPECT_EQ(r.notes[1],
            "rank 0 op #1 (wait_signal 'wait_signal') waits for semaphore 3 epoch 1, which no op "
            "signals: the wait orders nothing");
}

TEST(HappensBefore, ACycleOfSignalWaitsIsNotedAndStillChecked) {
  // Each rank waits for the other's signal before sending its own: it could not finish.
  Log r0, r1;
  r0.wait_signal(0, 1, 1);
  r0.signal(0, 2, 1);
  r1.wait_signal(0, 2, 1);
  r1.signal(0, 1, 1);
  const HbResult r = check({r0, r1});
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("cycle"), std::string::npos);
  EXPECT_TRUE(r.races.empty());
}

}  // namespace
}  // namespace cprr

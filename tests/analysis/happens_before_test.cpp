// check_happens_before on hand-built op logs: orderings that must not be reported (events recorded
// after the writer, synchronization, read-backs, collectives, stream order, disjoint bytes) and
// races that must be, named by op pair, bytes and fix (seeds 001 and 003 of issue 11).
#include "analysis/happens_before.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "analysis/race_fix.h"

namespace cprr {
namespace {

constexpr uint32_t kDevice = 0, kSymmetric = 1, kHost = 2;

ByteRange bytes(uint32_t buffer, std::string name, uint64_t begin, uint64_t end,
                uint32_t pool = kDevice, int32_t owner = -1) {
  return ByteRange{pool, owner, begin, end, buffer, std::move(name)};
}

using Ranges = std::vector<ByteRange>;

/// One rank's ops in issue order; each call appends an op and returns its seq.
struct Log {
  RankOps ops;

  uint64_t add(HbOp op) {
    op.seq = ops.size();
    ops.push_back(std::move(op));
    return ops.back().seq;
  }
  uint64_t op(int32_t stream, std::string kind, std::string name, Ranges reads, Ranges writes,
              SyncRole role = SyncRole::none) {
    HbOp op;
    op.stream = stream;
    op.kind = std::move(kind);
    op.name = std::move(name);
    op.reads = std::move(reads);
    op.writes = std::move(writes);
    op.role = role;
    return add(std::move(op));
  }
  /// An opaque call handed `touched`: accesses of unknown direction.
  uint64_t opaque(int32_t stream, std::string name, Ranges touched) {
    HbOp op;
    op.stream = stream;
    op.kind = "native";
    op.name = std::move(name);
    op.touches = std::move(touched);
    return add(std::move(op));
  }
  uint64_t kernel(int32_t stream, std::string name, Ranges reads, Ranges writes) {
    return op(stream, "kernel", std::move(name), std::move(reads), std::move(writes));
  }
  uint64_t copy(int32_t stream, std::string name, Ranges reads, Ranges writes) {
    return op(stream, "copy", std::move(name), std::move(reads), std::move(writes));
  }
  uint64_t host(std::string name, Ranges reads, Ranges writes) {
    return op(-1, "host", std::move(name), std::move(reads), std::move(writes));
  }
  uint64_t event_op(int32_t stream, SyncRole role, int64_t event) {
    HbOp op;
    op.stream = stream;
    op.kind = op.name = role == SyncRole::record ? "record" : "wait";
    op.role = role;
    op.event = event;
    return add(std::move(op));
  }
  uint64_t record(int32_t stream, int64_t event) {
    return event_op(stream, SyncRole::record, event);
  }
  uint64_t wait(int32_t stream, int64_t event) { return event_op(stream, SyncRole::wait, event); }
  /// synchronize(stream), or synchronize() for -1.
  uint64_t sync(int32_t stream) {
    return op(stream, "sync", "synchronize", {}, {},
              stream < 0 ? SyncRole::host_join_all : SyncRole::host_join);
  }
  uint64_t read_back(int32_t stream, ByteRange r) {
    return op(stream, "copy", "read back", {std::move(r)}, {}, SyncRole::host_join);
  }
  uint64_t collective(int32_t stream, std::string kind, uint64_t number, Ranges reads = {},
                      Ranges writes = {}) {
    HbOp op;
    op.stream = stream;
    op.kind = "collective";
    op.name = std::move(kind);
    op.reads = std::move(reads);
    op.writes = std::move(writes);
    op.role = SyncRole::collective;
    op.collective_seq = number;
    return add(std::move(op));
  }
  uint64_t signal_op(int32_t stream, SyncRole role, uint32_t semaphore, uint64_t epoch) {
    HbOp op;
    op.stream = stream;
    op.kind = op.name = role == SyncRole::signal ? "signal" : "wait_signal";
    op.role = role;
    op.semaphore = semaphore;
    op.epoch = epoch;
    return add(std::move(op));
  }
  uint64_t signal(int32_t s, uint32_t sem, uint64_t epoch) {
    return signal_op(s, SyncRole::signal, sem, epoch);
  }
  uint64_t wait_signal(int32_t s, uint32_t sem, uint64_t epoch) {
    return signal_op(s, SyncRole::wait_signal, sem, epoch);
  }
};

HbResult check(std::vector<Log> logs) {
  std::vector<RankOps> ranks;
  for (Log& l : logs) ranks.push_back(std::move(l.ops));
  return check_happens_before(ranks);
}

/// "rank:seq" of both ops, to compare a race's pair in one assertion.
std::pair<std::string, std::string> pair_of(const Race& r) {
  return {std::to_string(r.first.rank) + ":" + std::to_string(r.first.seq),
          std::to_string(r.second.rank) + ":" + std::to_string(r.second.seq)};
}
using Pair = std::pair<std::string, std::string>;

const ByteRange kX = bytes(1, "x", 0, 64);
const ByteRange kY = bytes(2, "y", 64, 128);

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

const ByteRange kWindow = bytes(9, "recv window", 0, 64, kSymmetric);
const ByteRange kPutIntoRank1 = bytes(8, "send", 0, 64, kSymmetric, /*owner=*/1);

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

// ---- fixes: ordered after the group's latest op on each thread, and verified ----

TEST(HappensBeforeFix, TwoWritersOnOneStreamThenAnUnorderedReaderWaitsForTheSecond) {
  Log l;
  l.kernel(1, "fill", {}, {kX});
  l.kernel(1, "scale", {}, {kX});
  l.kernel(0, "consume", {kX}, {});
  const HbResult r = check({l});
  ASSERT_EQ(r.race_count, 2u);
  const Race& race = r.races[0];
  EXPECT_EQ(pair_of(race), Pair("0:0", "0:2"));  // the first pair is still the one reported
  EXPECT_EQ(race.group_pairs, 2u);
  ASSERT_EQ(race.fix_after.size(), 1u);
  EXPECT_EQ(race.fix_after[0].seq, 1u);
  EXPECT_TRUE(race.fix_verified);
  // Waiting for an event after "fill" would leave "scale" racing with "consume".
  EXPECT_EQ(race.fix,
            "stream 0 must wait for an event recorded after op #1 (kernel 'scale') on stream 1, "
            "before op #2 (kernel 'consume')");
}

TEST(HappensBeforeFix, AReaderWaitingForTheFirstWriterOnlyIsToldToWaitForTheSecond) {
  Log l;
  l.kernel(1, "fill", {}, {kX});
  l.record(1, 0);
  l.kernel(1, "scale", {}, {kX});
  l.wait(0, 0);
  l.kernel(0, "consume", {kX}, {});
  const HbResult r = check({l});
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_EQ(pair_of(r.races[0]), Pair("0:2", "0:4"));
  EXPECT_EQ(r.races[0].group_pairs, 1u);
  EXPECT_TRUE(r.races[0].fix_verified);
  EXPECT_EQ(r.races[0].fix,
            "stream 0 must wait for an event recorded after op #2 (kernel 'scale') on stream 1, "
            "before op #4 (kernel 'consume')");
}

TEST(HappensBeforeFix, BytesFilledReadFreedAndReusedOnAnotherStreamWaitForTheLastReader) {
  // Stream 1 fills 'a' and reads it; 'a' is freed and its bytes become 'b', written on stream 2
  // with no ordering: both the fill and the read race with the write.
  const ByteRange a = bytes(1, "a", 0, 64), b = bytes(2, "b", 0, 64);
  Log l;
  l.kernel(1, "fill a", {}, {a});
  l.kernel(1, "read a", {a}, {kY});
  l.kernel(2, "write b", {}, {b});
  const HbResult r = check({l});
  ASSERT_EQ(r.race_count, 2u);
  const Race& race = r.races[0];
  EXPECT_EQ(race.overlaps[0].first_buffer_name, "a");
  EXPECT_EQ(race.overlaps[0].second_buffer_name, "b");
  EXPECT_EQ(race.group_pairs, 2u);
  EXPECT_TRUE(race.fix_verified);
  EXPECT_EQ(race.fix,
            "stream 2 must wait for an event recorded after op #1 (kernel 'read a') on stream 1, "
            "before op #2 (kernel 'write b')");
}

TEST(HappensBeforeFix, ConflictsOnTwoStreamsNeedAnEdgeFromEach) {
  Log l;
  l.kernel(1, "low half", {}, {bytes(1, "x", 0, 32)});
  l.kernel(2, "high half", {}, {bytes(1, "x", 32, 64)});
  l.kernel(0, "consume", {kX}, {});
  const HbResult r = check({l});
  ASSERT_EQ(r.race_count, 2u);
  const Race& race = r.races[0];
  EXPECT_EQ(race.group_pairs, 2u);
  ASSERT_EQ(race.fix_after.size(), 2u);
  EXPECT_TRUE(race.fix_verified);
  EXPECT_EQ(race.fix,
            "on rank 0, stream 0 must wait for an event recorded after op #0 (kernel 'low half') "
            "on stream 1 and an event recorded after op #1 (kernel 'high half') on stream 2, "
            "before op #2 (kernel 'consume')");
}

TEST(HappensBeforeFix, AHostReadSynchronizesTheStreamAfterItsLastWriter) {
  Log l;
  l.copy(1, "stage 1", {}, {kX});
  l.copy(1, "stage 2", {}, {kX});
  l.host("inspect", {kX}, {});
  const HbResult r = check({l});
  ASSERT_EQ(r.race_count, 2u);
  EXPECT_TRUE(r.races[0].fix_verified);
  EXPECT_EQ(r.races[0].fix,
            "the host must synchronize stream 1 after op #1 (copy 'stage 2') before op #2 (host "
            "'inspect')");
}

TEST(HappensBeforeFix, TwoPutsIntoAPeersWindowNeedTheSignalAfterTheSecond) {
  Log r0, r1;
  r0.copy(1, "put", {bytes(2, "send src", 0, 64)}, {kPutIntoRank1});
  r0.copy(1, "put again", {bytes(2, "send src", 0, 64)}, {kPutIntoRank1});
  r1.kernel(0, "consume", {kWindow}, {});
  const HbResult r = check({r0, r1});
  ASSERT_EQ(r.race_count, 2u);
  const Race& race = r.races[0];
  EXPECT_EQ(race.group_pairs, 2u);
  EXPECT_TRUE(race.fix_verified);
  EXPECT_EQ(race.fix,
            "on rank 1, stream 0 must wait for a signal that rank 0 sends after its op #1 (copy "
            "'put again') on stream 1, before op #0 (kernel 'consume')");
}

TEST(HappensBeforeFix, AnOrderingTheLogCannotHaveIsNotVerified) {
  // plan_fix on a "group" whose first op is issued after the later op on the later op's own
  // stream: a wait before the later op cannot see an event recorded after it, and the
  // verification says so instead of trusting the plan.
  Log l;
  l.kernel(0, "later", {kX}, {});
  l.kernel(1, "first", {}, {kX});
  const std::vector<RankOps> ranks{l.ops};
  const std::vector<OrientedPair> pairs{{OpId{0, 1}, OpId{0, 0}, {1}}};
  const FixPlan plan = plan_fix(ranks, pairs, OpId{0, 0}, 1);
  EXPECT_EQ(plan.group_pairs, 1u);
  ASSERT_EQ(plan.after.size(), 1u);
  EXPECT_FALSE(plan.verified);
  // The same pair the right way round is verified.
  const std::vector<OrientedPair> real{{OpId{0, 0}, OpId{0, 1}, {1}}};
  EXPECT_TRUE(plan_fix(ranks, real, OpId{0, 1}, 1).verified);
}

// ---- reporting ----

// ---- accesses of unknown direction (HbOp::touches): candidates ----

TEST(HappensBeforeCandidate, AnOpaqueCallUnorderedWithAReaderOrAWriterIsACandidate) {
  Log l;
  l.opaque(1, "lib_fill", {kX});
  l.kernel(0, "consume", {kX}, {});    // a known read: the call may write what it reads
  l.kernel(2, "overwrite", {}, {kX});  // a known write
  l.kernel(0, "own", {kY}, {});        // reads y, which only it touches
  const HbResult r = check({l});
  ASSERT_EQ(r.races.size(), 3u);
  EXPECT_TRUE(r.races[0].candidate);
  EXPECT_TRUE(r.races[1].candidate);
  EXPECT_EQ(pair_of(r.races[0]), Pair("0:0", "0:1"));
  EXPECT_TRUE(r.races[0].first.inferred);
  EXPECT_FALSE(r.races[0].second.inferred);
  EXPECT_NE(r.races[0].first.describe().find("(native 'lib_fill', direction unknown)"),
            std::string::npos)
      << r.races[0].first.describe();
  EXPECT_EQ(r.races[0].second.describe().find("unknown"), std::string::npos);
  // consume and overwrite race on known directions: not a candidate.
  EXPECT_EQ(pair_of(r.races[2]), Pair("0:1", "0:2"));
  EXPECT_FALSE(r.races[2].candidate) << "the 3rd pair is consume/overwrite";
}

TEST(HappensBeforeCandidate, TwoOpaqueCallsOnTheSameBytesAreACandidateTwoKnownReadsAreNothing) {
  Log l;
  l.opaque(1, "lib_a", {kX});
  l.opaque(2, "lib_b", {kX});
  l.kernel(3, "read_y", {kY}, {});
  l.kernel(4, "read_y_too", {kY}, {});
  const HbResult r = check({l});
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_EQ(pair_of(r.races[0]), Pair("0:0", "0:1"));
  EXPECT_TRUE(r.races[0].candidate);
  EXPECT_TRUE(r.races[0].first.inferred);
  EXPECT_TRUE(r.races[0].second.inferred);
}

TEST(HappensBeforeCandidate, OrderedOpaqueCallsAreNoRaceAndAKnownOverlapMakesThePairExact) {
  Log ordered;
  ordered.opaque(1, "lib_fill", {kX});
  ordered.record(1, 0);
  ordered.wait(0, 0);
  ordered.kernel(0, "consume", {kX}, {});
  EXPECT_TRUE(check({ordered}).races.empty());

  // One op both writes y (declared) and is handed x; the other reads both: the pair races on
  // known directions over y, whatever x is.
  Log mixed;
  HbOp call;
  call.stream = 1;
  call.kind = "native";
  call.name = "lib";
  call.writes = {kY};
  call.touches = {kX};
  mixed.add(call);
  mixed.kernel(0, "consume", {kX, kY}, {});
  const HbResult r = check({mixed});
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_FALSE(r.races[0].candidate);
  EXPECT_FALSE(r.races[0].first.inferred) << "an exact race names no side as inferred";
  EXPECT_EQ(r.races[0].overlaps.size(), 2u);
}

// A probe replay learned the calls' directions (HbOp::unchanged: bytes a call left as they were,
// a read or nothing). Two calls that left the weights unchanged are no race; a learned write
// unordered with a reader is a race of known directions; unchanged bytes against a known write
// stay a candidate (the call may not have read them at all).
TEST(HappensBeforeCandidate, ProbedCallsRaceOnlyThroughWhatTheyChanged) {
  const auto probed = [](Log& l, int32_t stream, std::string name, Ranges writes,
                         Ranges unchanged) {
    HbOp op;
    op.stream = stream;
    op.kind = "kernel";
    op.name = std::move(name);
    op.writes = std::move(writes);
    op.unchanged = std::move(unchanged);
    return l.add(std::move(op));
  };
  Log readers;
  probed(readers, 1, "scale_a", {kY}, {kX});
  probed(readers, 2, "scale_b", {}, {kX});
  readers.kernel(3, "read_x", {kX}, {});
  EXPECT_TRUE(check({readers}).races.empty()) << "x is only read or left alone";

  Log writer;
  probed(writer, 1, "scale", {kY}, {kX});
  writer.kernel(0, "consume", {kY}, {});
  const HbResult w = check({writer});
  ASSERT_EQ(w.races.size(), 1u);
  EXPECT_FALSE(w.races[0].candidate) << "the probe saw y change: a known write";
  EXPECT_FALSE(w.races[0].first.inferred);

  Log overwritten;
  probed(overwritten, 1, "scale", {}, {kX});
  overwritten.kernel(0, "zero_x", {}, {kX});
  const HbResult o = check({overwritten});
  ASSERT_EQ(o.races.size(), 1u);
  EXPECT_TRUE(o.races[0].candidate) << "unchanged bytes may not have been read";
  EXPECT_TRUE(o.races[0].first.inferred);
  EXPECT_FALSE(o.races[0].second.inferred);
}

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

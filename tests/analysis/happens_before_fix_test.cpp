// check_happens_before's fixes for the races it reports (ordered after the group's latest op on
// each thread, and verified against the log) and its candidates: accesses of unknown direction
// (HbOp::touches) that may race, on hand-built op logs (hb_log.h).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "analysis/happens_before.h"
#include "analysis/race_fix.h"
#include "tests/analysis/hb_log.h"

namespace cprr {
namespace {

using namespace hb_test;  // NOLINT(google-build-using-namespace): the tests' own log builder

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

}  // namespace
}  // namespace cprr

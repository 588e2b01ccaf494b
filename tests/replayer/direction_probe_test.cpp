// A probe replay's learned directions put into the run's op logs (replayer/direction_probe.h),
// on hand-built logs: the ops handed buffers with no direction line up in order, take the
// probe's writes and unchanged bytes when they are the same op, and a rank whose probe took
// another path stops at the first op that differs.
#include "replayer/direction_probe.h"

#include <gtest/gtest.h>

#include "tests/analysis/analysis_support.h"

namespace cprr {
namespace {

// "scale" handed src (buffer 1) and dst (buffer 2), 64 bytes each, as the run logged it.
OpRecord handed(uint64_t seq, const char* name = "scale") {
  OpRecord op{seq, 1, "kernel", name, {}, {}, -1};
  op.touches = {1, 2};
  op.touch_spans = {{0, 64}, {0, 64}};
  return op;
}

// The same op as the probe left it: dst [0, 48) changed, src and dst [48, 64) unchanged.
OpRecord learned(uint64_t seq, const char* name = "scale") {
  OpRecord op{seq, 1, "kernel", name, {}, {2}, -1};
  op.write_spans = {{0, 48}};
  op.touches = {1, 2};
  op.touch_spans = {{0, 64}, {48, 16}};
  op.probed = true;
  return op;
}

ExecutionResult with_ops(std::vector<std::vector<OpRecord>> ranks) {
  ExecutionResult e = test::execution(1, Mode::fresh, ExecStatus::pass,
                                      std::vector<std::string>(ranks.size(), "x"));
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    CaseCapture& c = e.ranks[r].done->capture;
    c.ops = std::move(ranks[r]);
    c.allocs = {AllocRecord{0, false, 1, "src", "device", 64, 0, 0},
                AllocRecord{1, false, 2, "dst", "device", 64, 64, 0}};
  }
  return e;
}

TEST(DirectionProbe, TheRunTakesWhatTheProbeLearnedOpByOp) {
  const OpRecord plain{0, 0, "kernel", "fill", {}, {1}, -1};
  ExecutionResult run = with_ops({{plain, handed(1)}});
  EXPECT_TRUE(has_unknown_directions(run));
  // cprr's own work in the probe (an op counting unseen copies) shifts the seqs: order lines up.
  const OpRecord unseen{1, -1, "unseen", "1 copies", {}, {}, -1};
  const ExecutionResult probe = with_ops({{plain, unseen, learned(2)}});
  const ProbeApplied applied = apply_probe(probe, run);
  EXPECT_EQ(applied.ops, 1);
  EXPECT_TRUE(applied.mismatch.empty()) << applied.mismatch;
  const OpRecord& op = run.ranks[0].done->capture.ops[1];
  EXPECT_EQ(op.seq, 1u) << "the run's own numbering stays";
  EXPECT_TRUE(op.probed);
  EXPECT_EQ(op.writes, std::vector<uint32_t>{2});
  EXPECT_EQ(op.write_spans, (std::vector<ByteSpan>{{0, 48}}));
  EXPECT_EQ(op.touch_spans, (std::vector<ByteSpan>{{0, 64}, {48, 16}}));
  EXPECT_FALSE(has_unknown_directions(run));
  EXPECT_EQ(run.ranks[0].done->capture.ops[0], plain);

  const std::vector<std::string> lines = describe_learned(probe, 8);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "rank 0 op #2 (kernel 'scale'): writes 'dst' [0, 48); leaves 'src' [0, 64), "
            "'dst' [48, 64) unchanged");
}

TEST(DirectionProbe, AnotherOpOrOtherBytesStopTheRankThere) {
  ExecutionResult run = with_ops({{handed(0, "scale"), handed(1, "shift")}, {handed(0)}});
  const ExecutionResult probe = with_ops({{learned(0, "other"), learned(1, "shift")}, {learned(0)}});
  const ProbeApplied applied = apply_probe(probe, run);
  EXPECT_EQ(applied.ops, 1) << "rank 1 only: rank 0 stopped at its first op";
  EXPECT_NE(applied.mismatch.find("rank 0: the probe's op #0 (kernel 'other') is not op #0"),
            std::string::npos)
      << applied.mismatch;
  EXPECT_FALSE(run.ranks[0].done->capture.ops[1].probed) << "nothing after a mismatch";
  EXPECT_TRUE(run.ranks[1].done->capture.ops[0].probed);

  // The same op handed other bytes (another size) is not taken either.
  ExecutionResult bigger = with_ops({{handed(0)}});
  bigger.ranks[0].done->capture.ops[0].touch_spans[1].bytes = 128;
  EXPECT_EQ(apply_probe(with_ops({{learned(0)}}), bigger).ops, 0);
  // An op the probe could not copy (no probed flag) is skipped, and the ones after it line up.
  ExecutionResult two = with_ops({{handed(0), handed(1, "shift")}});
  EXPECT_EQ(apply_probe(with_ops({{handed(0), learned(1, "shift")}}), two).ops, 1);
  EXPECT_TRUE(two.ranks[0].done->capture.ops[1].probed);
}

}  // namespace
}  // namespace cprr

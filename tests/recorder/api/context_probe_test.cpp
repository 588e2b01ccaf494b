// A probe replay (Perturbation::probe_touches) on the CPU backend: an opaque call handed two
// buffers with no direction is logged with what it changed as writes (widened to whole words,
// runs whose words touch joined) and the rest as unchanged touches (OpRecord::probed); without
// the probe the log keeps the touches as they were handed, and so does a probe whose call changed
// bytes too scattered to name exactly.
#include <gtest/gtest.h>

#include <cstring>

#include "recorder/api/context.h"
#include "tests/recorder/api/context_support.h"

namespace cprr {
namespace {

using test::make_state;

// src (256 bytes) and dst (1024), zeroed; an opaque call on a side stream handed both writes 1.0f
// into `count` floats of dst from float 4 on, every `stride`-th; then a host access.
CaseCapture run_case(bool probe, int stride = 1, int count = 25) {
  RankState st = make_state();
  Perturbation p;
  p.probe_touches = probe;
  Context ctx(st, "unit/probe", {}, 1, Placement::best_fit, 0, p);
  const Stream main = ctx.stream();
  const Stream side = ctx.create_stream("side");
  const Buffer src = ctx.alloc("src", 256);
  const Buffer dst = ctx.alloc("dst", 1024);
  ctx.host_access("zero", Access{{}, {src, dst}});
  std::memset(src.ptr, 0, 256);
  std::memset(dst.ptr, 0, 1024);
  for (int i = 0; i < 25; ++i) src.as<float>()[i] = 1.0f;
  ctx.native(side, "lib_copy", Access{.uses = {src, dst}}, [dst, stride, count](void*) {
    for (int i = 0; i < count; ++i) dst.as<float>()[4 + i * stride] = 1.0f;
  });
  ctx.host_access("after", Access{{dst}, {}});
  ctx.drain();
  return ctx.finish();
}

TEST(ContextProbe, AProbeReplayLogsWhatAnOpaqueCallChangedAsItsWrites) {
  const CaseCapture plain = run_case(false);
  const CaseCapture probed = run_case(true);
  ASSERT_EQ(plain.ops.size(), probed.ops.size()) << "the probe adds no op";
  const OpRecord& before = plain.ops[1];
  ASSERT_EQ(before.name, "lib_copy");
  EXPECT_FALSE(before.probed);
  EXPECT_TRUE(before.writes.empty());
  EXPECT_EQ(before.touches.size(), 2u);

  const OpRecord& op = probed.ops[1];
  EXPECT_TRUE(op.probed);
  const uint32_t src = before.touches[0], dst = before.touches[1];
  // 1.0f changes the upper two bytes of each float: widened to whole words, joined.
  EXPECT_EQ(op.writes, std::vector<uint32_t>{dst});
  EXPECT_EQ(op.write_spans, (std::vector<ByteSpan>{{16, 100}}));
  EXPECT_EQ(op.touches, (std::vector<uint32_t>{src, dst, dst}));
  EXPECT_EQ(op.touch_spans, (std::vector<ByteSpan>{{0, 256}, {0, 16}, {116, 908}}));
  EXPECT_EQ(probed.ops[2], plain.ops[2]) << "ops after it are logged as without the probe";
}

// Every other float written: 25 runs, each its own (the float between two is not claimed as
// written). 100 of them are more runs than a touch keeps (64): the op stays unprobed, handed
// both buffers with no direction, rather than be given bytes it did not write.
TEST(ContextProbe, RunsAreNotJoinedAcrossBytesThatDidNotChange) {
  const OpRecord op = run_case(true, 2).ops[1];
  ASSERT_TRUE(op.probed);
  ASSERT_EQ(op.write_spans.size(), 25u);
  EXPECT_EQ(op.write_spans[0], (ByteSpan{16, 4}));
  EXPECT_EQ(op.write_spans[1], (ByteSpan{24, 4}));
  EXPECT_EQ(op.write_spans[24], (ByteSpan{16 + 48 * 4, 4}));

  const OpRecord scattered = run_case(true, 2, 100).ops[1];
  EXPECT_FALSE(scattered.probed);
  EXPECT_TRUE(scattered.writes.empty());
  EXPECT_EQ(scattered.touches.size(), 2u);
}


}  // namespace
}  // namespace cprr

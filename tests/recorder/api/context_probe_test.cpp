// A probe replay (Perturbation::probe_touches) on the CPU backend: an opaque call handed two
// buffers with no direction is logged with what it changed as writes (widened to whole words,
// close runs joined) and the rest as unchanged touches (OpRecord::probed); without the probe the
// log keeps the touches as they were handed.
#include <gtest/gtest.h>

#include <cstring>

#include "recorder/api/context.h"
#include "tests/recorder/api/context_support.h"

namespace cprr {
namespace {

using test::make_state;

// src and dst (256 bytes each, zeroed by a first kernel); an opaque call on a side stream copies
// src's first 25 floats, set to 1.0f, into dst[4..29) and reads nothing else; then a kernel.
CaseCapture run_case(bool probe) {
  RankState st = make_state();
  Perturbation p;
  p.probe_touches = probe;
  Context ctx(st, "unit/probe", {}, 1, Placement::best_fit, 0, p);
  const Stream main = ctx.stream();
  const Stream side = ctx.create_stream("side");
  const Buffer src = ctx.alloc("src", 256);
  const Buffer dst = ctx.alloc("dst", 256);
  ctx.host_access("zero", Access{{}, {src, dst}});
  std::memset(src.ptr, 0, 256);
  std::memset(dst.ptr, 0, 256);
  for (int i = 0; i < 25; ++i) src.as<float>()[i] = 1.0f;
  ctx.native(side, "lib_copy", Access{.uses = {src, dst}}, [src, dst](void*) {
    std::memcpy(dst.as<float>() + 4, src.as<float>(), 25 * sizeof(float));
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
  EXPECT_EQ(op.touch_spans, (std::vector<ByteSpan>{{0, 256}, {0, 16}, {116, 140}}));
  EXPECT_EQ(probed.ops[2], plain.ops[2]) << "ops after it are logged as without the probe";
}

}  // namespace
}  // namespace cprr

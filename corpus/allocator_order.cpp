// Seed 002 (pytorch#178138): NCCL symmetric memory assumes every rank placed "the same" tensor at
// the same window offset, but an allocator that reuses free blocks by address, after rank-
// dependent frees, hands different ranks different slots; a symmetric all-reduce then reads each
// peer's window at the wrong place and silently returns wrong sums.
// - bug/symmetric_address_order: each rank frees the bucket it finished with first (rank-
//   dependent), then allocates the accumulator, which reuses a different slot on odd and even
//   ranks. Expected verdict: allocator_order (the record's symmetric layouts differ), and on the
//   CPU backend the sums are wrong too.
// - fixed/symmetric_address_order: every rank frees in the same order, so every rank's
//   accumulator lands in the same slot and the sums are right (checked).
#include <cstdint>
#include <vector>

#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {
namespace {

// Gradient buckets of 2 MiB of f32: NCCL (2.28) runs an all-reduce of a symmetric window on its
// symmetric kernels only for a sum of floating-point data, and only its load/store kernels
// (chosen for larger messages) read peers' windows at this rank's offset.
constexpr uint64_t kElems = uint64_t{1} << 19;

void symmetric_accumulate(Context& ctx, bool fixed) {
  const uint64_t bytes = kElems * sizeof(float);
  const Stream s = ctx.stream();
  const Buffer bucket_a = ctx.alloc("bucket_a", bytes, MemPool::symmetric);
  const Buffer bucket_b = ctx.alloc("bucket_b", bytes, MemPool::symmetric);
  const Buffer keep = ctx.alloc("keep", bytes, MemPool::symmetric);  // the tail stays in use
  ctx.launch(s, "fill_a", kElems, kernels::FillConst<float>{bucket_a.as<float>(), 1000.0f},
             Access{{}, {bucket_a}});
  ctx.launch(s, "fill_b", kElems, kernels::FillConst<float>{bucket_b.as<float>(), 2000.0f},
             Access{{}, {bucket_b}});
  ctx.launch(s, "fill_keep", kElems, kernels::FillConst<float>{keep.as<float>(), 3000.0f},
             Access{{}, {keep}});
  ctx.synchronize();
  // Which bucket a rank is done with first depends on its work: the bug. The twin's lifetime is
  // the same on every rank.
  const bool a_first = fixed || ctx.rank() % 2 == 0;
  ctx.free(a_first ? bucket_a : bucket_b);
  // Address-ordered reuse (best_fit): the accumulator takes the slot this rank just freed.
  const Buffer acc = ctx.alloc("acc", bytes, MemPool::symmetric);
  ctx.launch(s, "fill_acc", kElems,
             kernels::FillConst<float>{acc.as<float>(), static_cast<float>(ctx.rank() + 1)},
             Access{{}, {acc}});
  ctx.all_reduce(s, acc, DType::f32);
  ctx.output("acc", acc, DType::f32);
  if (!fixed) return;
  const int w = ctx.world_size();
  const auto want = static_cast<float>(w * (w + 1) / 2);
  const std::vector<float> got = ctx.read<float>(s, acc);
  for (uint64_t i = 0; i < kElems; ++i) {
    CPRR_EXPECT(got[i] == want, "acc[{}] = {}, expected {}", i, got[i], want);
  }
}

}  // namespace

CPRR_CASE(symmetric_address_order, "bug/symmetric_address_order",
          {.world_sizes = {2, 4},
           .description = "seed 002: rank-dependent frees, then address-ordered reuse puts the "
                          "accumulator at different symmetric offsets on different ranks; a "
                          "symmetric all-reduce returns wrong sums",
           .seeded_bug = "allocator_order"}) {
  symmetric_accumulate(ctx, false);
}

CPRR_CASE(symmetric_address_order_fixed, "fixed/symmetric_address_order",
          {.world_sizes = {2, 4},
           .description = "the twin: every rank frees in the same order, so the accumulator has "
                          "one offset everywhere"}) {
  symmetric_accumulate(ctx, true);
}

}  // namespace cprr

// A gradient accumulator that is never zeroed: the first step adds into whatever the allocation
// held. A fresh process's pool is zero pages, so a fresh run is right; in a reused process the
// bytes are an earlier case's, so the pooled run is wrong. It looks like a state leak, but the
// leaked bytes are only the carrier: the bug is the read of bytes nothing wrote.
// - bug/uninitialized_read: `acc += grad` on an accumulator never written (verdict
//   uninitialized_read, naming the accumulator and the first reading op).
// - fixed/uninitialized_read: zeroes the accumulator first.
#include <cstdint>
#include <vector>

#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {
namespace {

constexpr uint64_t kElems = 8192;

void accumulate_grads(Context& ctx, bool fixed) {
  const Stream s = ctx.stream();
  const Buffer grad = ctx.alloc("grad", kElems * 4);
  const Buffer acc = ctx.alloc("grad_acc", kElems * 4);
  if (fixed) {
    ctx.launch(s, "zero_acc", kElems, kernels::FillConst<float>{acc.as<float>(), 0.0f},
               Access{{}, {acc}});
  }
  for (int step = 0; step < 3; ++step) {
    ctx.launch(s, "grad_step", kElems,
               kernels::FillConst<float>{grad.as<float>(), static_cast<float>(ctx.rank() + step)},
               Access{{}, {grad}});
    ctx.launch(s, "accumulate", kElems,
               kernels::Axpy{acc.as<float>(), grad.as<float>(), acc.as<float>(), 1.0f},
               Access{{grad, acc}, {acc}});
  }
  ctx.all_reduce(s, acc, DType::f32);
  ctx.output("grad_acc", acc, DType::f32);
  if (!fixed) return;
  // Every rank adds rank + 0 + rank + 1 + rank + 2; the all-reduce sums that over the ranks.
  const int w = ctx.world_size();
  const float want = static_cast<float>(3 * (w * (w - 1) / 2) + 3 * w);
  const std::vector<float> got = ctx.read<float>(s, acc);
  for (uint64_t i = 0; i < kElems; ++i) {
    CPRR_EXPECT(got[i] == want, "grad_acc[{}] = {}, expected {}", i, got[i], want);
  }
}

}  // namespace

CPRR_CASE(uninitialized_read, "bug/uninitialized_read",
          {.world_sizes = {2, 4},
           .description = "an accumulator never zeroed: zero pages hide it in a fresh process, an "
                          "earlier case's bytes show it in a reused one",
           .seeded_bug = "uninitialized_read"}) {
  accumulate_grads(ctx, false);
}

CPRR_CASE(uninitialized_read_fixed, "fixed/uninitialized_read",
          {.world_sizes = {2, 4}, .description = "the twin: zeroes the accumulator first"}) {
  accumulate_grads(ctx, true);
}

}  // namespace cprr

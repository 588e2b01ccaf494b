// Cases only the benchmarks run: linked with the corpus into cprr_bench_worker, never into
// cpworker, so the built-in corpus (and every count of it) stays as it is.
#include <fmt/format.h>

#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {

// Many captures of one small buffer: what recording costs per capture when the hash itself is
// nothing (cprr_bench_recording divides the overhead by the captures per rank).
CPRR_CASE(small_captures, "bench/small_captures",
          {.world_sizes = {2},
           .grid = {{"bytes", {"256"}}, {"count", {"1000"}}},
           .description = "one small buffer probed `count` times, then output"}) {
  const auto bytes = static_cast<uint64_t>(ctx.param_int("bytes"));
  const auto count = ctx.param_int("count");
  const Stream s = ctx.stream();
  const Buffer x = ctx.alloc("x", bytes, MemPool::device, s);
  ctx.launch(s, "fill_x", bytes / 4,
             kernels::FillRandom<float>{x.as<float>(), ctx.seed() + ctx.rank()}, Access{{}, {x}});
  for (int64_t i = 0; i < count; ++i) ctx.probe(fmt::format("p{}", i), x, DType::f32, s);
  ctx.output("x", x, DType::f32, {}, s);
}

// A pipeline schedule bug: the last stage calls the step's barrier while the others still call
// the gradient all-reduce. Neither completes; cprr_bench_mismatch times how soon it is named
// (mismatch=1) against the same calls in the right order (mismatch=0).
CPRR_CASE(schedule_mismatch, "bench/schedule_mismatch",
          {.world_sizes = {2, 4},
           .grid = {{"mismatch", {"1"}}},
           .expect = Expect::hang,
           .timeout_s = 30,
           .description = "the last rank calls barrier where the others call all_reduce",
           .seeded_bug = "collective_mismatch"}) {
  const Stream s = ctx.stream();
  const Buffer grads = ctx.alloc("grads", 4096 * 4, MemPool::device, s);
  ctx.launch(s, "fill_grads", 4096, kernels::FillConst<float>{grads.as<float>(), 1.0f},
             Access{{}, {grads}});
  const bool skips = ctx.param_int("mismatch") != 0 && ctx.rank() == ctx.world_size() - 1;
  if (!skips) ctx.all_reduce(s, grads, DType::f32);
  ctx.barrier(s);
  if (skips) ctx.all_reduce(s, grads, DType::f32);
  ctx.synchronize();
}

}  // namespace cprr

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

}  // namespace cprr

// Data-parallel gradient averaging, the way a trainer syncs gradients: every rank computes its own
// gradients, they are summed across ranks and scaled by 1/world. Written against the installed
// Case API only.
#include <cprr/case.h>
#include <cprr/kernels.h>

#include <cmath>

namespace {

// Rank r's gradient at i, as FillRandom computes it on either backend.
float grad(uint64_t seed, int rank, uint64_t i) { return cprr::random_unit_float(seed + rank, i); }

}  // namespace

CPRR_CASE(gradient_average, "example/gradient_average",
          {.world_sizes = {2, 4},
           .grid = {{"n", {"1000", "65536"}}},
           .description = "all_reduce of per-rank gradients, then scale by 1/world"}) {
  const auto n = static_cast<uint64_t>(ctx.param_int("n"));
  const cprr::Buffer g = ctx.alloc("grad", n * 4);
  const cprr::Buffer zero = ctx.alloc("zero", n * 4);
  const cprr::Buffer avg = ctx.alloc("avg", n * 4);
  ctx.launch(ctx.stream(), "backward", n,
             cprr::kernels::FillRandom<float>{g.as<float>(), ctx.seed() + ctx.rank()},
             cprr::Access{{}, {g}});
  ctx.launch(ctx.stream(), "zero", n, cprr::kernels::FillConst<float>{zero.as<float>(), 0.0f},
             cprr::Access{{}, {zero}});
  ctx.all_reduce(ctx.stream(), g, cprr::DType::f32);
  ctx.probe("summed", g, cprr::DType::f32);
  // 1/world is a power of two for these world sizes: the scaling is exact.
  const float scale = 1.0f / static_cast<float>(ctx.world_size());
  ctx.launch(ctx.stream(), "scale", n,
             cprr::kernels::Axpy{avg.as<float>(), g.as<float>(), zero.as<float>(), scale},
             cprr::Access{{g, zero}, {avg}});
  ctx.output("avg", avg, cprr::DType::f32);

  // The reduction's order is the backend's, so compare with a tolerance, not bit for bit.
  const std::vector<float> got = ctx.read<float>(ctx.stream(), avg);
  for (uint64_t i = 0; i < n; i += 97) {
    float expect = 0;
    for (int r = 0; r < ctx.world_size(); ++r) expect += grad(ctx.seed(), r, i);
    expect *= scale;
    CPRR_EXPECT(std::fabs(got[i] - expect) <= 1e-5f, "element {} is {}, expected {}", i, got[i],
                expect);
  }
}

CPRR_CASE(parameter_broadcast, "example/parameter_broadcast",
          {.world_sizes = {2, 4}, .description = "rank 0's initial parameters reach every rank"}) {
  const uint64_t n = 4096;
  const cprr::Buffer params = ctx.alloc("params", n * 4);
  // Every rank initializes with its own seed; only rank 0's values may survive the broadcast.
  ctx.launch(ctx.stream(), "init", n,
             cprr::kernels::FillRandom<float>{params.as<float>(), ctx.seed() + 7 * ctx.rank()},
             cprr::Access{{}, {params}});
  ctx.broadcast(ctx.stream(), params, cprr::DType::f32, 0);
  ctx.output("params", params, cprr::DType::f32);
  const std::vector<float> got = ctx.read<float>(ctx.stream(), params);
  for (uint64_t i = 0; i < n; i += 101) {
    CPRR_EXPECT(got[i] == grad(ctx.seed(), 0, i), "element {} is not rank 0's", i);
  }
}

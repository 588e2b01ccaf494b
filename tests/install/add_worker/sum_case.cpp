// One small case for the cprr_add_worker worker: an all_reduce of iota, checked on the host.
#include <cprr/case.h>
#include <cprr/kernels.h>

CPRR_CASE(sum, "install_test/sum", {.world_sizes = {2}}) {
  const cprr::Buffer b = ctx.alloc("data", 64 * 4);
  ctx.launch(ctx.stream(), "fill", 64, cprr::kernels::FillIota<int32_t>{b.as<int32_t>(), 0},
             cprr::Access{{}, {b}});
  ctx.all_reduce(ctx.stream(), b, cprr::DType::i32);
  ctx.output("sum", b, cprr::DType::i32);
  CPRR_EXPECT(ctx.read<int32_t>(ctx.stream(), b)[63] == 63 * 2, "the sum is wrong");
}

// Healthy references: one case per collective, each checking its own result, so a harness bug
// that corrupts data shows up as a failing healthy case.
#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {
namespace {

// Inputs for the reductions: integers small enough that sums are exact in every dtype, so every
// rank can check the result bit for bit.
template <class T>
void check_all_reduce(Context& ctx, uint64_t n) {
  const Buffer buf = ctx.alloc("data", n * sizeof(T));
  ctx.launch(ctx.stream(), "fill", n, kernels::FillIota<T>{buf.as<T>(), T(ctx.rank() * 3)},
             Access{{}, {buf}});
  ctx.all_reduce(ctx.stream(), buf, *parse_dtype(ctx.param("dtype")));
  ctx.output("sum", buf, *parse_dtype(ctx.param("dtype")));
  const std::vector<T> got = ctx.read<T>(ctx.stream(), buf);
  const int w = ctx.world_size();
  for (uint64_t i = 0; i < n; ++i) {
    const T expect = static_cast<T>(w * static_cast<T>(i) + 3 * (w * (w - 1) / 2));
    CPRR_EXPECT(got[i] == expect, "element {} is {}, expected {}", i, got[i], expect);
  }
}

}  // namespace

CPRR_CASE(noop, "healthy/noop",
          {.world_sizes = {2, 4}, .description = "does nothing; measures dispatch cost"}) {}

CPRR_CASE(all_reduce, "healthy/all_reduce",
          {.world_sizes = {2, 4},
           .grid = {{"count", {"1", "1000", "65539"}}, {"dtype", {"f32", "f64", "i32", "i64"}}},
           .description = "in-place sum; every element checked"}) {
  const auto n = static_cast<uint64_t>(ctx.param_int("count"));
  switch (*parse_dtype(ctx.param("dtype"))) {
    case DType::f32:
      return check_all_reduce<float>(ctx, n);
    case DType::f64:
      return check_all_reduce<double>(ctx, n);
    case DType::i32:
      return check_all_reduce<int32_t>(ctx, n);
    case DType::i64:
      return check_all_reduce<int64_t>(ctx, n);
    default:
      break;
  }
  CPRR_EXPECT(false, "unsupported dtype {}", ctx.param("dtype"));
}

CPRR_CASE(all_gather, "healthy/all_gather",
          {.world_sizes = {2, 4}, .grid = {{"count", {"1", "4099"}}}}) {
  const auto n = static_cast<uint64_t>(ctx.param_int("count"));
  const Buffer in = ctx.alloc("in", n * 4);
  const Buffer out = ctx.alloc("out", n * 4 * ctx.world_size());
  ctx.launch(ctx.stream(), "fill", n,
             kernels::FillIota<int32_t>{in.as<int32_t>(), ctx.rank() * 100000}, Access{{}, {in}});
  ctx.all_gather(ctx.stream(), in, out, DType::i32);
  ctx.output("gathered", out, DType::i32);
  const std::vector<int32_t> gathered = ctx.read<int32_t>(ctx.stream(), out);
  for (int r = 0; r < ctx.world_size(); ++r) {
    for (uint64_t i = 0; i < n; ++i) {
      const int32_t got = gathered[r * n + i];
      CPRR_EXPECT(got == r * 100000 + static_cast<int32_t>(i), "block {} element {} is {}", r, i,
                  got);
    }
  }
}

CPRR_CASE(all_to_all_v, "healthy/all_to_all_v",
          {.world_sizes = {2, 4},
           .grid = {{"unit", {"1", "1000"}}},
           .description = "uneven splits, including zero-sized ones"}) {
  const int w = ctx.world_size();
  const int64_t unit = ctx.param_int("unit");
  // Rank s sends ((s + d) % 3) * unit elements to rank d: some pairs exchange nothing.
  auto count = [&](int s, int d) { return ((s + d) % 3) * unit; };
  std::vector<int64_t> send(w), recv(w);
  int64_t send_total = 0, recv_total = 0;
  for (int p = 0; p < w; ++p) {
    send[p] = count(ctx.rank(), p);
    recv[p] = count(p, ctx.rank());
    send_total += send[p];
    recv_total += recv[p];
  }
  const Buffer in = ctx.alloc("in", std::max<int64_t>(send_total, 1) * 4);
  const Buffer out = ctx.alloc("out", std::max<int64_t>(recv_total, 1) * 4);
  ctx.launch(ctx.stream(), "fill", send_total,
             kernels::FillIota<int32_t>{in.as<int32_t>(), ctx.rank() * 1000000}, Access{{}, {in}});
  ctx.all_to_all_v(ctx.stream(), in, send, out, recv, DType::i32);
  ctx.output("received", out.slice(0, recv_total * 4), DType::i32);
  const std::vector<int32_t> got = ctx.read<int32_t>(ctx.stream(), out);
  int64_t at = 0;
  for (int p = 0; p < w; ++p) {
    int64_t offset_at_sender = 0;  // where our chunk started in p's send buffer
    for (int d = 0; d < ctx.rank(); ++d) offset_at_sender += count(p, d);
    for (int64_t i = 0; i < recv[p]; ++i, ++at) {
      const int32_t expect = p * 1000000 + static_cast<int32_t>(offset_at_sender + i);
      CPRR_EXPECT(got[at] == expect, "from rank {} element {}: {} != {}", p, i, got[at], expect);
    }
  }
}

CPRR_CASE(broadcast, "healthy/broadcast", {.world_sizes = {2, 4}}) {
  const Buffer buf = ctx.alloc("data", 4096 * 8);
  const int root = ctx.world_size() - 1;
  ctx.launch(ctx.stream(), "fill", 4096,
             kernels::FillRandom<double>{buf.as<double>(), ctx.seed() + ctx.rank()},
             Access{{}, {buf}});
  ctx.broadcast(ctx.stream(), buf, DType::f64, root);
  ctx.barrier(ctx.stream());
  ctx.output("data", buf, DType::f64);
  const std::vector<double> got = ctx.read<double>(ctx.stream(), buf);
  CPRR_EXPECT(got[7] == static_cast<double>(random_unit_float(ctx.seed() + root, 7)),
              "rank {} did not receive root {}'s data", ctx.rank(), root);
}

}  // namespace cprr

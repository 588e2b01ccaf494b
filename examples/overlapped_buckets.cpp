// Gradient buckets all-reduced on a communication stream while the compute stream produces the
// next bucket, as DDP overlaps them. The events are what makes it correct: the comm stream waits
// for each bucket's producer, and the compute stream waits for every reduction before reading.
#include <cprr/case.h>
#include <cprr/kernels.h>

#include <vector>

CPRR_CASE(overlapped_buckets, "example/overlapped_buckets",
          {.world_sizes = {2, 4},
           .grid = {{"buckets", {"2", "4"}}},
           .description = "per-bucket all_reduce on a comm stream, overlapped with compute"}) {
  const auto buckets = static_cast<int>(ctx.param_int("buckets"));
  const uint64_t n = 8192;  // elements per bucket
  const cprr::Stream compute = ctx.create_stream("compute");
  const cprr::Stream comm = ctx.create_stream("comm");
  const cprr::Buffer grads = ctx.alloc("grads", buckets * n * 4, cprr::MemPool::device, compute);
  for (int b = 0; b < buckets; ++b) {
    const cprr::Buffer bucket = grads.slice(b * n * 4, n * 4);
    // Integers in float: the sums are exact whatever the reduction order.
    const float base = static_cast<float>(1000 * b + 10 * ctx.rank());
    ctx.launch(compute, "backward_bucket", n,
               cprr::kernels::FillIota<float>{bucket.as<float>(), base},
               cprr::Access{{}, {bucket}});
    ctx.wait(comm, ctx.record(compute));
    ctx.all_reduce(comm, bucket, cprr::DType::f32);
  }
  ctx.wait(compute, ctx.record(comm));
  ctx.output("grads", grads, cprr::DType::f32, {buckets, static_cast<int64_t>(n)}, compute);

  const std::vector<float> got = ctx.read<float>(compute, grads);
  const int w = ctx.world_size();
  for (int b = 0; b < buckets; ++b) {
    for (uint64_t i = 0; i < n; i += 211) {
      const float expect =
          static_cast<float>(w * (1000 * b + static_cast<int>(i)) + 10 * (w * (w - 1) / 2));
      CPRR_EXPECT(got[b * n + i] == expect, "bucket {} element {} is {}, expected {}", b, i,
                  got[b * n + i], expect);
    }
  }
}

// Healthy multi-stream references: correctly synchronized pipelines. Their seeded-bug twins
// (a missing wait) come with the stream-race localization work.
#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {

CPRR_CASE(two_stream_pipeline, "healthy/two_stream_pipeline",
          {.world_sizes = {2, 4},
           .grid = {{"n", {"4096", "1048576"}}},
           .description = "producer stream -> event -> consumer stream -> all_reduce"}) {
  const auto n = static_cast<uint64_t>(ctx.param_int("n"));
  const Stream producer = ctx.create_stream("producer");
  const Stream consumer = ctx.create_stream("consumer");
  const Buffer x = ctx.alloc("x", n * 4, MemPool::device, producer);
  const Buffer y = ctx.alloc("y", n * 4, MemPool::device, producer);
  const Buffer out = ctx.alloc("out", n * 4, MemPool::device, consumer);
  ctx.launch(producer, "fill_x", n,
             kernels::FillRandom<float>{x.as<float>(), ctx.seed() ^ ctx.rank()}, Access{{}, {x}});
  ctx.launch(producer, "fill_y", n, kernels::FillRandom<float>{y.as<float>(), ctx.seed() + 1},
             Access{{}, {y}});
  ctx.wait(consumer, ctx.record(producer));
  ctx.launch(consumer, "axpy", n,
             kernels::Axpy{out.as<float>(), x.as<float>(), y.as<float>(), 2.0f},
             Access{{x, y}, {out}});
  ctx.probe("axpy", out, DType::f32, consumer);
  ctx.all_reduce(consumer, out, DType::f32);
  ctx.output("out", out, DType::f32, {}, consumer);
}

// A ring-style step pipeline shaped like context-parallel attention: at every step each rank
// computes on the KV block it holds (compute stream) while passing that block to its right
// neighbour and receiving the left one's (comm stream), then folds the step into its result.
CPRR_CASE(cp_ring, "healthy/cp_ring",
          {.world_sizes = {2, 4},
           .grid = {{"block", {"1024", "65536"}}},
           .description = "context-parallel ring: compute / exchange / combine per step"}) {
  const auto n = static_cast<uint64_t>(ctx.param_int("block"));
  const int w = ctx.world_size();
  const int next = (ctx.rank() + 1) % w, prev = (ctx.rank() + w - 1) % w;
  const Stream compute = ctx.create_stream("compute");
  const Stream comm = ctx.create_stream("comm");
  const Buffer q = ctx.alloc("q", n * 4, MemPool::device, compute);
  const Buffer kv[2] = {ctx.alloc("kv0", n * 4, MemPool::device, compute),
                        ctx.alloc("kv1", n * 4, MemPool::device, comm)};
  const Buffer partial = ctx.alloc("partial", n * 4, MemPool::device, compute);
  const Buffer acc = ctx.alloc("acc", n * 4, MemPool::device, compute);
  const Buffer max_logit = ctx.alloc("max_logit", n * 4, MemPool::device, compute);
  ctx.launch(compute, "fill_q", n,
             kernels::FillRandom<float>{q.as<float>(), ctx.seed() + 17 * ctx.rank()},
             Access{{}, {q}});
  ctx.launch(compute, "fill_kv", n,
             kernels::FillRandom<float>{kv[0].as<float>(), ctx.seed() + 31 * ctx.rank()},
             Access{{}, {kv[0]}});
  ctx.launch(compute, "zero_acc", n, kernels::FillConst<float>{acc.as<float>(), 0.0f},
             Access{{}, {acc}});
  ctx.launch(compute, "init_max", n, kernels::FillConst<float>{max_logit.as<float>(), -1e30f},
             Access{{}, {max_logit}});
  Event computed = ctx.record(compute);
  for (int step = 0; step < w; ++step) {
    const Buffer& cur = kv[step % 2];
    const Buffer& nxt = kv[(step + 1) % 2];
    Event exchanged;
    if (step + 1 < w) {
      // nxt was read by the previous step's compute: the exchange may overwrite it only after.
      ctx.wait(comm, computed);
      std::vector<int64_t> send(w, 0), recv(w, 0);
      send[next] = static_cast<int64_t>(n);
      recv[prev] = static_cast<int64_t>(n);
      ctx.all_to_all_v(comm, cur, send, nxt, recv, DType::f32);
      exchanged = ctx.record(comm);
    }
    ctx.launch(compute, "attend", n,
               kernels::AttendStep{partial.as<float>(), q.as<float>(), cur.as<float>(), n},
               Access{{q, cur}, {partial}});
    ctx.launch(compute, "combine", n,
               kernels::CombineStep{acc.as<float>(), max_logit.as<float>(), partial.as<float>()},
               Access{{partial, acc, max_logit}, {acc, max_logit}});
    ctx.probe(fmt::format("acc_step{}", step), acc, DType::f32, compute);
    computed = ctx.record(compute);
    if (step + 1 < w) ctx.wait(compute, exchanged);
  }
  ctx.output("acc", acc, DType::f32, {}, compute);
  ctx.output("max_logit", max_logit, DType::f32, {}, compute);
}

}  // namespace cprr

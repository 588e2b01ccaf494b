// Groups (Context::split): a 2x2 mesh at W=4, tensor-parallel groups of neighbours {0,1} {2,3}
// and data-parallel groups across them {0,2} {1,3} (at W=2: {0,1}, and a group of one each), as
// C++ code with NCCL communicators split from the world writes it. Bugs, each beside a twin:
// a collective that differs inside one tp group only, a dp group whose member skips its
// all-reduce (a hang naming the group and that rank), a pipeline in a group whose stage sends one
// micro-batch short, an MoE dispatch whose receive counts were never exchanged, and a send in a
// group whose buffer another stream rewrites. The twins of corpus/python/test_mesh.py's.
#include "corpus/messages.h"
#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {
namespace {

constexpr uint64_t kElems = 128;  // floats per rank's tensor

struct Mesh {
  Group tp;  // neighbours: world ranks 2k, 2k + 1
  Group dp;  // across: world ranks k, k + 2
};

Mesh mesh(Context& ctx) {
  Mesh m{ctx.split(ctx.rank() / 2), ctx.split(ctx.rank() % 2)};
  return m;
}

Buffer filled(Context& ctx, Stream s, const char* name, uint64_t elems, float value) {
  const Buffer b = ctx.alloc(name, elems * 4);
  ctx.launch(s, "fill", elems, kernels::FillConst<float>{b.as<float>(), value}, Access{{}, {b}});
  return b;
}

// The tp group reduces, the dp group gathers the result, tp neighbours swap it by message.
// `short_on_rank_3`: rank 3 reduces fewer elements than rank 2, its tp neighbour.
void mesh_step(Context& ctx, bool short_on_rank_3) {
  const Stream s = ctx.stream();
  const Mesh m = mesh(ctx);
  const uint64_t n = short_on_rank_3 && ctx.rank() == 3 ? kElems * 3 / 4 : kElems;
  const Buffer grad = filled(ctx, s, "grad", n, float(ctx.rank() + 1));
  m.tp.all_reduce(s, grad, DType::f32);
  const Buffer gathered = ctx.alloc("gathered", n * 4 * m.dp.size());
  m.dp.all_gather(s, grad, gathered, DType::f32);
  if (m.tp.size() == 2) {
    const Buffer theirs = ctx.alloc("theirs", n * 4);
    // Group rank 0 sends first: a send returns only once it was received.
    if (m.tp.rank() == 0) {
      m.tp.send(s, 1, grad, DType::f32);
      m.tp.recv(s, 1, theirs, DType::f32);
    } else {
      m.tp.recv(s, 0, theirs, DType::f32);
      m.tp.send(s, 0, grad, DType::f32);
    }
    ctx.output("theirs", theirs, DType::f32, {}, s);
  }
  ctx.output("gathered", gathered, DType::f32, {}, s);
}

}  // namespace

CPRR_CASE(mesh_groups, "healthy/mesh_groups",
          {.world_sizes = {2, 4},
           .description = "tp groups all-reduce and swap by message, dp groups all-gather"}) {
  mesh_step(ctx, false);
}

CPRR_CASE(tp_group_mismatch, "bug/tp_group_mismatch",
          {.world_sizes = {4},
           .timeout_s = 10,
           .description = "rank 3 all-reduces 3/4 of what rank 2, its tp neighbour, does",
           .seeded_bug = "collective_mismatch"}) {
  mesh_step(ctx, true);
}

CPRR_CASE(tp_group_mismatch_fixed, "fixed/tp_group_mismatch",
          {.world_sizes = {4}, .description = "the twin: every tp rank reduces as many"}) {
  mesh_step(ctx, false);
}

namespace {

// Every dp group all-reduces; `skip_on_rank_3`: rank 3 returns first, so rank 1 waits alone.
void dp_sync(Context& ctx, bool skip_on_rank_3) {
  const Stream s = ctx.stream();
  const Mesh m = mesh(ctx);
  const Buffer grad = filled(ctx, s, "grad", kElems, float(ctx.rank() + 1));
  m.tp.all_reduce(s, grad, DType::f32);
  if (!(skip_on_rank_3 && ctx.rank() == 3)) m.dp.all_reduce(s, grad, DType::f32);
  ctx.output("grad", grad, DType::f32, {}, s);
  ctx.synchronize();
}

}  // namespace

CPRR_CASE(dp_group_hang, "bug/dp_group_hang",
          {.world_sizes = {4},
           .expect = Expect::hang,
           .timeout_s = 3,
           .description = "rank 3 skips its dp group's all-reduce: rank 1 waits in it"}) {
  dp_sync(ctx, true);
}

CPRR_CASE(dp_group_sync, "fixed/dp_group_hang",
          {.world_sizes = {4}, .description = "the twin: both dp ranks all-reduce"}) {
  dp_sync(ctx, false);
}

namespace {

// A pipeline whose stages are the ranks of one group in reverse world order (key: -rank), so
// group ranks and world ranks differ; stage 1 sends `sent_by_stage_1` of 4 micro-batches.
void group_pipeline(Context& ctx, int sent_by_stage_1) {
  const Stream s = ctx.stream();
  const Group stages = ctx.split(0, -ctx.rank());
  const int me = stages.rank();
  const Buffer acts = ctx.alloc("acts", kElems * 4);
  const Buffer out = ctx.alloc("out", kElems * 4 * 4);
  for (int mb = 0; mb < 4; ++mb) {
    if (me == 0) {
      ctx.launch(s, "load", kElems, kernels::FillConst<float>{acts.as<float>(), float(mb + 1)},
                 Access{{}, {acts}});
    } else {
      stages.recv(s, me - 1, acts, DType::f32);
    }
    const Buffer slot = out.slice(uint64_t(mb) * kElems * 4, kElems * 4);
    ctx.launch(s, "stage", kElems,
               kernels::Axpy{slot.as<float>(), acts.as<float>(), acts.as<float>(), 1.0f},
               Access{{acts}, {slot}});
    ctx.copy(s, acts, slot);
    if (me < stages.size() - 1 && (me != 1 || mb < sent_by_stage_1)) {
      stages.send(s, me + 1, acts, DType::f32);
    }
  }
  ctx.output("out", out, DType::f32, {}, s);
}

}  // namespace

CPRR_CASE(group_pipeline, "healthy/group_pipeline",
          {.world_sizes = {2, 4},
           .description = "a pipeline over a group in reverse world order, 4 micro-batches"}) {
  group_pipeline(ctx, 4);
}

CPRR_CASE(group_pipeline_recv_never_sent, "bug/group_pipeline_recv_never_sent",
          {.world_sizes = {4},
           .expect = Expect::hang,
           .timeout_s = 3,
           .description = "stage 1 (world rank 2) sends one micro-batch short: stage 2 (world "
                          "rank 1) waits in its last recv"}) {
  group_pipeline(ctx, 3);
}

namespace {

constexpr uint64_t kTokenElems = 8;  // floats per token

// Rows this world rank routes to world rank `to`.
int64_t routed(int from, int to) { return (from + 2 * to) % 5 + 1; }

// An MoE dispatch inside each tp group: every rank routes routed(me, peer) tokens to each peer.
// `exchange`: the receive counts come from the peers (an all-to-all of the counts first);
// otherwise each rank assumes it receives what it sends.
void moe_dispatch(Context& ctx, bool exchange) {
  const Stream s = ctx.stream();
  const Group tp = ctx.split(ctx.rank() / 2);
  std::vector<int64_t> send_rows, recv_rows;
  for (int j = 0; j < tp.size(); ++j) send_rows.push_back(routed(ctx.rank(), tp.world_rank(j)));
  recv_rows = send_rows;
  if (exchange) {
    const Buffer mine = ctx.alloc("send_counts", 8 * tp.size());
    const Buffer theirs = ctx.alloc("recv_counts", 8 * tp.size());
    for (int j = 0; j < tp.size(); ++j) {
      const Buffer slot = mine.slice(8 * uint64_t(j), 8);
      ctx.launch(s, "count", 1, kernels::FillConst<int64_t>{slot.as<int64_t>(), send_rows[j]},
                 Access{{}, {slot}});
    }
    const std::vector<int64_t> ones(tp.size(), 1);
    tp.all_to_all_v(s, mine, ones, theirs, ones, DType::i64);
    recv_rows = ctx.read<int64_t>(s, theirs);
  }
  std::vector<int64_t> send_counts, recv_counts;
  int64_t sent = 0, received = 0;
  for (int j = 0; j < tp.size(); ++j) {
    send_counts.push_back(send_rows[j] * int64_t(kTokenElems));
    recv_counts.push_back(recv_rows[j] * int64_t(kTokenElems));
    sent += send_counts.back();
    received += recv_counts.back();
  }
  const Buffer tokens = filled(ctx, s, "tokens", uint64_t(sent), float(ctx.rank() + 1));
  const Buffer dispatched = ctx.alloc("dispatched", uint64_t(received) * 4);
  tp.all_to_all_v(s, tokens, send_counts, dispatched, recv_counts, DType::f32);
  ctx.output("dispatched", dispatched, DType::f32, {}, s);
  ctx.synchronize();
}

}  // namespace

CPRR_CASE(moe_counts_not_exchanged, "bug/moe_counts_not_exchanged",
          {.world_sizes = {4},
           .timeout_s = 10,
           .description = "each tp rank expects from a peer the tokens it routes to that peer",
           .seeded_bug = "collective_mismatch"}) {
  moe_dispatch(ctx, false);
}

CPRR_CASE(moe_counts_exchanged, "fixed/moe_counts_not_exchanged",
          {.world_sizes = {4}, .description = "the twin: the tp ranks exchange their counts"}) {
  moe_dispatch(ctx, true);
}

CPRR_CASE(group_send_buffer_rewritten, "bug/group_send_buffer_rewritten",
          {.world_sizes = {4},
           .description = "each tp group's first rank rewrites its activations on the compute "
                          "stream while the comm stream may still be sending them",
           .seeded_bug = "stream_race"}) {
  send_while_rescaling(ctx, ctx.split(ctx.rank() / 2), false);
}

CPRR_CASE(group_send_buffer_rewritten_fixed, "fixed/group_send_buffer_rewritten",
          {.world_sizes = {4},
           .description = "the twin: the compute stream waits for the send before rewriting"}) {
  send_while_rescaling(ctx, ctx.split(ctx.rank() / 2), true);
}

// Ranks that vote no color (negative) join no group of the split: the last rank stays out of a
// reduction among the others (NCCL_SPLIT_NOCOLOR), and its Group says so.
CPRR_CASE(group_of_some_ranks, "healthy/group_of_some_ranks",
          {.world_sizes = {2, 4},
           .description = "every rank but the last splits into one group and all-reduces in it"}) {
  const Stream s = ctx.stream();
  const bool last = ctx.rank() == ctx.world_size() - 1;
  const Group some = ctx.split(last ? -1 : 0);
  CPRR_EXPECT(some.member() == !last, "rank {} is {}a member", ctx.rank(),
              some.member() ? "" : "not ");
  const Buffer x = filled(ctx, s, "x", kElems, float(ctx.rank() + 1));
  if (some.member()) some.all_reduce(s, x, DType::f32);
  ctx.all_reduce(s, x, DType::f32, ReduceOp::max);  // the world's, after it
  ctx.output("x", x, DType::f32, {}, s);
}

// A trap: two splits of the same colors make two groups of the same ranks; each numbers its own
// collectives, so the second's first all-reduce is no later call of the first's.
CPRR_CASE(same_ranks_two_groups, "healthy/same_ranks_two_groups",
          {.world_sizes = {4},
           .description = "two splits into the same tp groups, all-reducing in turn"}) {
  const Stream s = ctx.stream();
  const Group a = ctx.split(ctx.rank() / 2), b = ctx.split(ctx.rank() / 2);
  const Buffer x = filled(ctx, s, "x", kElems, float(ctx.rank()));
  const Buffer y = filled(ctx, s, "y", kElems * 2, 1.0f);
  a.all_reduce(s, x, DType::f32);
  b.all_reduce(s, y, DType::f32);
  b.all_reduce(s, x, DType::f32, ReduceOp::max);
  ctx.output("x", x, DType::f32, {}, s);
  ctx.output("y", y, DType::f32, {}, s);
}

}  // namespace cprr

// Point-to-point messages (Context::send / recv): a pipeline's stages passing activations, each
// recv matched with its send by number. Bugs: a stage that sends one micro-batch short (the next
// stage waits in a recv never sent: a hang naming both ranks and the message), a receive sized
// from the wrong count (the message's size differs), and a send buffer rewritten by another
// stream while the send may still read it (a stream race). Each has a twin.
#include "corpus/messages.h"

#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {
namespace {

constexpr uint64_t kRow = 256;  // floats per activation

// Stage r receives each micro-batch from r - 1, scales it and sends it to r + 1; stage 1 sends
// `sent_by_stage_1` of them.
void pipeline(Context& ctx, int microbatches, int sent_by_stage_1) {
  const Stream s = ctx.stream();
  const Buffer acts = ctx.alloc("acts", kRow * 4);
  const Buffer out = ctx.alloc("out", kRow * 4 * microbatches);
  for (int mb = 0; mb < microbatches; ++mb) {
    if (ctx.rank() == 0) {
      ctx.launch(s, "load", kRow, kernels::FillConst<float>{acts.as<float>(), float(mb + 1)},
                 Access{{}, {acts}});
    } else {
      ctx.recv(s, ctx.rank() - 1, acts, DType::f32);
    }
    const Buffer slot = out.slice(uint64_t(mb) * kRow * 4, kRow * 4);
    ctx.launch(s, "stage", kRow,
               kernels::Axpy{slot.as<float>(), acts.as<float>(), acts.as<float>(), 1.0f},
               Access{{acts}, {slot}});
    ctx.copy(s, acts, slot);
    const bool last = ctx.rank() == ctx.world_size() - 1;
    if (!last && (ctx.rank() != 1 || mb < sent_by_stage_1)) {
      ctx.send(s, ctx.rank() + 1, acts, DType::f32);
    }
  }
  ctx.output("out", out, DType::f32, {}, s);
}

}  // namespace

CPRR_CASE(pipeline_messages, "healthy/pipeline_messages",
          {.world_sizes = {2, 4},
           .description = "a pipeline of stages passing 4 micro-batches with send / recv"}) {
  pipeline(ctx, 4, 4);
}

CPRR_CASE(pipeline_recv_never_sent, "bug/pipeline_recv_never_sent",
          {.world_sizes = {4},
           .expect = Expect::hang,
           .timeout_s = 3,
           .description = "stage 1 sends one micro-batch short: stage 2 waits in its last recv"}) {
  pipeline(ctx, 4, 3);
}

namespace {

// Rank 0 sends `rows` rows to rank 1, which receives `expected` rows.
void exchange(Context& ctx, uint64_t rows, uint64_t expected) {
  const Stream s = ctx.stream();
  if (ctx.rank() == 0) {
    const Buffer b = ctx.alloc("tokens", rows * kRow * 4);
    ctx.launch(s, "fill", rows * kRow, kernels::FillConst<float>{b.as<float>(), 2.0f},
               Access{{}, {b}});
    ctx.send(s, 1, b, DType::f32);
  } else if (ctx.rank() == 1) {
    const Buffer b = ctx.alloc("tokens", expected * kRow * 4);
    ctx.recv(s, 0, b, DType::f32);
    ctx.output("tokens", b, DType::f32, {}, s);
  }
  ctx.synchronize();
}

}  // namespace

CPRR_CASE(message_size_mismatch, "bug/message_size_mismatch",
          {.world_sizes = {2},
           .timeout_s = 10,
           .description = "rank 1 sizes its receive from a stale count: 6 rows for 14 sent",
           .seeded_bug = "collective_mismatch"}) {
  exchange(ctx, 14, 6);
}

CPRR_CASE(message_size_mismatch_fixed, "fixed/message_size_mismatch",
          {.world_sizes = {2}, .description = "the twin: the receive is sized as sent"}) {
  exchange(ctx, 14, 14);
}

// Rank 0 sends its activations on the comm stream while the compute stream rescales them
// (corpus/messages.h).
void send_while_rescaling(Context& ctx, const Group& group, bool wait_first) {
  const Stream compute = ctx.stream();
  const Stream comm = ctx.create_stream("comm");
  const uint64_t n = 64 * kRow;
  const Buffer acts = ctx.alloc("acts", n * 4, MemPool::device, compute);
  if (group.rank() == 0 && group.size() > 1) {
    ctx.launch(compute, "produce", n, kernels::FillConst<float>{acts.as<float>(), 3.0f},
               Access{{}, {acts}});
    ctx.wait(comm, ctx.record(compute));
    group.send(comm, 1, acts, DType::f32);
    if (wait_first) ctx.wait(compute, ctx.record(comm));
    ctx.launch(compute, "rescale", n, kernels::FillConst<float>{acts.as<float>(), 0.5f},
               Access{{}, {acts}});
  } else if (group.rank() == 1) {
    group.recv(comm, 0, acts, DType::f32);
  }
  // Rank 0's result is what it rescaled (compute); rank 1's what it received (comm).
  ctx.output("acts", acts, DType::f32, {}, group.rank() == 0 ? compute : comm);
  ctx.synchronize();
}

CPRR_CASE(send_buffer_rewritten, "bug/send_buffer_rewritten",
          {.world_sizes = {2},
           .description = "rank 0 rewrites its activations on the compute stream while the comm "
                          "stream may still be sending them",
           .seeded_bug = "stream_race"}) {
  send_while_rescaling(ctx, ctx.world(), false);
}

CPRR_CASE(send_buffer_rewritten_fixed, "fixed/send_buffer_rewritten",
          {.world_sizes = {2},
           .description = "the twin: the compute stream waits for the send before rewriting"}) {
  send_while_rescaling(ctx, ctx.world(), true);
}

}  // namespace cprr

namespace cprr {

// A trap: one pair exchanges both ways with other sizes each way; each direction numbers its
// own messages, so nothing differs.
CPRR_CASE(messages_both_ways, "healthy/messages_both_ways",
          {.world_sizes = {2, 4},
           .description = "ranks 0 and 1 swap 64 rows one way and 16 rows the other"}) {
  if (ctx.rank() > 1) return;
  const Stream s = ctx.stream();
  const Buffer big = ctx.alloc("big", 64 * kRow * 4), small = ctx.alloc("small", 16 * kRow * 4);
  const Buffer mine = ctx.rank() == 0 ? big : small, theirs = ctx.rank() == 0 ? small : big;
  ctx.launch(s, "fill", mine.bytes / 4, kernels::FillConst<float>{mine.as<float>(), 1.0f},
             Access{{}, {mine}});
  // Rank 0 sends first, rank 1 receives first: a send returns only once it was received.
  if (ctx.rank() == 0) {
    ctx.send(s, 1, mine, DType::f32);
    ctx.recv(s, 1, theirs, DType::f32);
  } else {
    ctx.recv(s, 0, theirs, DType::f32);
    ctx.send(s, 0, mine, DType::f32);
  }
  ctx.output("theirs", theirs, DType::f32, {}, s);
}

}  // namespace cprr

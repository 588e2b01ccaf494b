// Seeded stream races, each with its fixed twin (fixed/<same name>), written against the public
// Case API the way a user writes a case:
// - bug/cp_maxlogit_race models seed 001's race in TransformerEngine's
//   AttnFuncWithCPAndKVAllGather.forward: max_logit_per_step[1] is written on cp_stream and read
//   by torch.maximum on the default stream one step later with no wait_stream; the wait for
//   cp_stream after the loop comes too late. Fix: wait for the writing stream before the maximum.
// - bug/pinned_staging_reuse models seed 003's first bug (mscclpp's alltoallv_single.py): one
//   pinned host buffer reused for the four non_blocking H2D copies of an all-to-all-v's counts and
//   displacements, so the host overwrites it before a queued copy read it. Fix: one staging
//   buffer per copy.
// - bug/alltoallv_skipped_wait models seed 003's third bug (mscclpp's alltoallv_kernel.hpp): a
//   one-sided all-to-all-v that skips the semaphore wait when it receives nothing from a peer, so
//   the epochs fall one behind and the next call's wait returns on an old signal while the peer's
//   put is still landing. Fix: always wait.
// - bug/use_after_free_across_streams is the record_stream class of bug: a buffer freed on the
//   host while another stream still reads it, its bytes handed to the next allocation and written
//   on a stream that never waited for the reader. Fix: the writer waits for an event recorded on
//   the reader after the read.
// The bug cases check nothing a race can break, so they run to completion whatever the race does:
// they are judged on having the race. The twins check their results against host references and
// give the same bytes on every run, fresh or pooled, on either backend.
#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <vector>

#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {
namespace {

// Runs a kernel functor on the host: the twins' references come from the same code the stream ran.
template <class F>
void run_on_host(uint64_t n, const F& f) {
  for (uint64_t i = 0; i < n; ++i) f(i);
}

template <class T>
void expect_equal(const std::vector<T>& got, const std::vector<T>& want, std::string_view what) {
  CPRR_EXPECT(got.size() == want.size(), "{} has {} elements, expected {}", what, got.size(),
              want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CPRR_EXPECT(got[i] == want[i], "{}[{}] = {}, expected {}", what, i, got[i], want[i]);
  }
}

uint64_t bytes_of(uint64_t elems, uint64_t elem_size) { return elems * elem_size; }

// ---- 1. seed 001: max_logit_per_step read on the default stream before cp_stream wrote it ----

constexpr uint64_t kCpSteps = 4;     // steps of the loop (the race is at step 2)
constexpr uint64_t kCpBlock = 4096;  // elements per step: the racing step kernel's work
constexpr float kStaleLogit = -1e30f;

uint64_t cp_q_seed(uint64_t seed, int rank) { return seed + 101 * static_cast<uint64_t>(rank) + 1; }
uint64_t cp_kv_seed(uint64_t seed, int rank) {
  return seed + 101 * static_cast<uint64_t>(rank) + 2;
}

void cp_maxlogit(Context& ctx, bool fixed) {
  const uint64_t n = kCpBlock, steps = kCpSteps, slice = bytes_of(n, 4);
  const Stream main = ctx.stream();
  const Stream cp_stream = ctx.create_stream("cp_stream");
  const std::array<Stream, 2> streams{main, cp_stream};  // flash_attn_streams
  const Buffer q = ctx.alloc("q", slice);
  const Buffer kv = ctx.alloc("kv", steps * slice);
  const Buffer out = ctx.alloc("out", steps * slice);
  const Buffer per_step = ctx.alloc("max_logit_per_step", steps * slice);
  const Buffer max_logit = ctx.alloc("max_logit", slice);
  ctx.launch(main, "fill_q", n,
             kernels::FillRandom<float>{q.as<float>(), cp_q_seed(ctx.seed(), ctx.rank())},
             Access{{}, {q}});
  ctx.launch(main, "fill_kv", steps * n,
             kernels::FillRandom<float>{kv.as<float>(), cp_kv_seed(ctx.seed(), ctx.rank())},
             Access{{}, {kv}});
  // What a read that comes too early sees: the step drops out of the maximum, as in the seed.
  ctx.launch(main, "init_max_logit_per_step", steps * n,
             kernels::FillConst<float>{per_step.as<float>(), kStaleLogit}, Access{{}, {per_step}});
  // cp_stream reads the inputs and writes slices initialized above: it waits for the init.
  ctx.wait(cp_stream, ctx.record(main));

  std::array<Event, kCpSteps> written{};
  for (uint64_t i = 0; i < steps; ++i) {
    const Stream s = streams[i % 2];
    const Buffer kv_i = kv.slice(i * slice, slice);
    const Buffer out_i = out.slice(i * slice, slice);
    const Buffer logits_i = per_step.slice(i * slice, slice);
    ctx.launch(s, fmt::format("attend_step{}", i), n,
               kernels::CpForwardStep{out_i.as<float>(), logits_i.as<float>(), q.as<float>(),
                                      kv_i.as<float>(), n},
               Access{{q, kv_i}, {out_i, logits_i}});
    if (fixed) written[i] = ctx.record(s);
    if (i == 0) continue;
    const Buffer prev = per_step.slice((i - 1) * slice, slice);
    // The fix: current_stream().wait_stream(flash_attn_streams[i - 1]) (a no-op when that is the
    // default stream itself). Without it, step 2 reads step 1's slice, written on cp_stream.
    if (fixed) ctx.wait(main, written[i - 1]);
    if (i == 1) {
      ctx.copy(main, max_logit, prev);  // max_logit = max_logit_per_step[0]
    } else {
      ctx.launch(main, fmt::format("maximum_step{}", i - 1), n,
                 kernels::MaximumInto{max_logit.as<float>(), prev.as<float>()},
                 Access{{max_logit, prev}, {max_logit}});
    }
  }
  // The seed's wait for cp_stream after the loop: it orders everything below, too late for step 2.
  ctx.wait(main, ctx.record(cp_stream));
  const Buffer last = per_step.slice((steps - 1) * slice, slice);
  ctx.launch(main, fmt::format("maximum_step{}", steps - 1), n,
             kernels::MaximumInto{max_logit.as<float>(), last.as<float>()},
             Access{{max_logit, last}, {max_logit}});
  ctx.all_reduce(main, max_logit, DType::f32, ReduceOp::max);
  ctx.output("max_logit", max_logit, DType::f32);
  ctx.output("out", out, DType::f32, {static_cast<int64_t>(steps), static_cast<int64_t>(n)});
  if (!fixed) return;

  // The twin's reference, from the same functors run on the host for every rank.
  std::vector<float> want_max(n, kStaleLogit), want_out;
  for (int r = 0; r < ctx.world_size(); ++r) {
    std::vector<float> hq(n), hkv(steps * n), hout(steps * n), hlogits(steps * n);
    run_on_host(n, kernels::FillRandom<float>{hq.data(), cp_q_seed(ctx.seed(), r)});
    run_on_host(steps * n, kernels::FillRandom<float>{hkv.data(), cp_kv_seed(ctx.seed(), r)});
    for (uint64_t i = 0; i < steps; ++i) {
      run_on_host(n, kernels::CpForwardStep{hout.data() + i * n, hlogits.data() + i * n, hq.data(),
                                            hkv.data() + i * n, n});
      run_on_host(n, kernels::MaximumInto{want_max.data(), hlogits.data() + i * n});
    }
    if (r == ctx.rank()) want_out = hout;
  }
  expect_equal(ctx.read<float>(main, max_logit), want_max, "max_logit");
  expect_equal(ctx.read<float>(main, out), want_out, "out");
}

// ---- 2. seed 003: one pinned staging buffer reused for four async H2D copies ----

constexpr int64_t kTokenStride = 4096;  // elements a rank holds for each destination

// Tokens rank `src` sends rank `dst`: uneven, different for every pair, at most 4000 (< stride).
int64_t token_count(int src, int dst) { return 1000 + 300 * src + 700 * dst; }

uint64_t token_seed(uint64_t seed, int rank) { return seed ^ (0x5eedull * (rank + 1)); }

std::vector<int64_t> exclusive_scan(const std::vector<int64_t>& counts) {
  std::vector<int64_t> out(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), out.begin(), int64_t{0});
  return out;
}

void pinned_staging(Context& ctx, bool fixed) {
  const int w = ctx.world_size(), me = ctx.rank();
  const Stream s = ctx.stream();
  std::vector<int64_t> send_counts(w), recv_counts(w);
  for (int p = 0; p < w; ++p) {
    send_counts[p] = token_count(me, p);
    recv_counts[p] = token_count(p, me);
  }
  const std::vector<int64_t> send_displs = exclusive_scan(send_counts);
  const std::vector<int64_t> recv_displs = exclusive_scan(recv_counts);
  const int64_t total_send = std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0});
  const int64_t total_recv = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
  const uint64_t chunks = static_cast<uint64_t>(w) * kTokenStride;

  // The tokens to route: a kernel the stream is still busy with while the host stages the arrays.
  const Buffer tokens = ctx.alloc("tokens", bytes_of(chunks, 4));
  ctx.launch(s, "make_tokens", chunks,
             kernels::FillRandom<int32_t>{tokens.as<int32_t>(), token_seed(ctx.seed(), me)},
             Access{{}, {tokens}});

  constexpr std::array<const char*, 4> kNames{"send_counts", "recv_counts", "send_displs",
                                              "recv_displs"};
  const std::array<const std::vector<int64_t>*, 4> arrays{&send_counts, &recv_counts, &send_displs,
                                                          &recv_displs};
  const uint64_t array_bytes = bytes_of(static_cast<uint64_t>(w), 8);
  std::array<Buffer, 4> dev;
  for (std::size_t k = 0; k < dev.size(); ++k) dev[k] = ctx.alloc(kNames[k], array_bytes);
  // The bug: one staging buffer for all four copies. The fix: a slice of its own for each.
  const Buffer staging =
      ctx.alloc("staging", fixed ? dev.size() * array_bytes : array_bytes, MemPool::host);
  for (std::size_t k = 0; k < dev.size(); ++k) {
    const Buffer slot = fixed ? staging.slice(k * array_bytes, array_bytes) : staging;
    for (int p = 0; p < w; ++p) slot.as<int64_t>()[p] = (*arrays[k])[p];
    ctx.host_access(fmt::format("fill staging {}", kNames[k]), Access{{}, {slot}});
    ctx.copy(s, dev[k], slot);  // non_blocking: nothing makes the next host write wait for it
  }

  const Buffer packed = ctx.alloc("packed", bytes_of(total_send, 4));
  ctx.launch(s, "pack", static_cast<uint64_t>(total_send),
             kernels::PackByDispls{packed.as<int32_t>(), tokens.as<int32_t>(), dev[0].as<int64_t>(),
                                   dev[2].as<int64_t>(), w, kTokenStride},
             Access{{tokens, dev[0], dev[2]}, {packed}});
  const Buffer received = ctx.alloc("received", bytes_of(total_recv, 4));
  ctx.all_to_all_v(s, packed, send_counts, received, recv_counts, DType::i32);
  const Buffer by_source = ctx.alloc("by_source", bytes_of(chunks, 4));
  ctx.launch(
      s, "unpack", chunks,
      kernels::UnpackByDispls{by_source.as<int32_t>(), received.as<int32_t>(), dev[1].as<int64_t>(),
                              dev[3].as<int64_t>(), total_recv, kTokenStride},
      Access{{received, dev[1], dev[3]}, {by_source}});
  for (std::size_t k = 0; k < dev.size(); ++k) ctx.output(kNames[k], dev[k], DType::i64);
  ctx.output("received", received, DType::i32);
  ctx.output("by_source", by_source, DType::i32, {w, kTokenStride});
  if (!fixed) return;

  for (std::size_t k = 0; k < dev.size(); ++k) {
    expect_equal(ctx.read<int64_t>(s, dev[k]), *arrays[k], kNames[k]);
  }
  std::vector<int32_t> want_received, want_by_source(chunks, -1);
  for (int p = 0; p < w; ++p) {
    std::vector<int32_t> theirs(chunks);
    run_on_host(chunks, kernels::FillRandom<int32_t>{theirs.data(), token_seed(ctx.seed(), p)});
    const auto first = theirs.begin() + static_cast<int64_t>(me) * kTokenStride;
    want_received.insert(want_received.end(), first, first + recv_counts[p]);
    std::copy(first, first + recv_counts[p], want_by_source.begin() + p * kTokenStride);
  }
  expect_equal(ctx.read<int32_t>(s, received), want_received, "received");
  expect_equal(ctx.read<int32_t>(s, by_source), want_by_source, "by_source");
}

// ---- 3. seed 003: a one-sided all-to-all-v that skips the wait for an empty receive ----

constexpr int64_t kWindowSlot = 4096;  // elements each receive window reserves per sender
constexpr Semaphore kA2aSem{0};

// Elements rank `src` sends rank `dst` in call `call` (0 or 1), at most 3600 (< kWindowSlot). In
// call 0 every rank receives nothing from its right neighbour; in call 1 something from everyone.
int64_t a2a_count(int call, int src, int dst, int w) {
  if (call == 0 && src == (dst + 1) % w) return 0;
  return 1500 + 400 * src + 200 * dst + 300 * call;
}

// What rank `src` sends rank `dst` in call `call`: values that name the call, the pair and the
// position.
int32_t a2a_base(int call, int src, int dst) {
  return (call + 1) * 1000000 + src * 100000 + dst * 10000;
}

// One call: every rank puts its chunk for peer p at the slot `window` reserves for it in p's copy
// (the same offset everywhere: symmetric buffers), signals p, waits for every peer's signal and
// reads its slots into `received` (packed in rank order).
void one_sided_all_to_all_v(Context& ctx, int call, const Buffer& window, const Buffer& received,
                            bool fixed) {
  const int w = ctx.world_size(), me = ctx.rank();
  const Stream s = ctx.stream();
  std::vector<int64_t> send_counts(w), recv_counts(w);
  for (int p = 0; p < w; ++p) {
    send_counts[p] = a2a_count(call, me, p, w);
    recv_counts[p] = a2a_count(call, p, me, w);
  }
  const std::vector<int64_t> send_displs = exclusive_scan(send_counts);
  const std::vector<int64_t> recv_displs = exclusive_scan(recv_counts);
  const int64_t total_send = std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0});
  const Buffer send = ctx.alloc(fmt::format("send{}", call), bytes_of(total_send, 4));
  for (int p = 0; p < w; ++p) {
    if (send_counts[p] == 0) continue;
    const Buffer chunk = send.slice(bytes_of(send_displs[p], 4), bytes_of(send_counts[p], 4));
    ctx.launch(s, fmt::format("fill_send{}_to{}", call, p), static_cast<uint64_t>(send_counts[p]),
               kernels::FillIota<int32_t>{chunk.as<int32_t>(), a2a_base(call, me, p)},
               Access{{}, {chunk}});
  }
  const auto slot_of = [&](int sender, int64_t count) {
    return window.slice(bytes_of(sender * kWindowSlot, 4), bytes_of(count, 4));
  };
  const auto out_of = [&](int sender) {
    return received.slice(bytes_of(recv_displs[sender], 4), bytes_of(recv_counts[sender], 4));
  };
  for (int p = 0; p < w; ++p) {
    if (p == me) continue;
    if (send_counts[p] > 0) {
      ctx.put(s, p, slot_of(me, send_counts[p]),
              send.slice(bytes_of(send_displs[p], 4), bytes_of(send_counts[p], 4)));
    }
    ctx.signal(s, p, kA2aSem);  // always, as the kernel does
  }
  // The self chunk never leaves the rank.
  ctx.copy(s, out_of(me), send.slice(bytes_of(send_displs[me], 4), bytes_of(send_counts[me], 4)));
  for (int p = 0; p < w; ++p) {
    if (p == me) continue;
    // The bug: no wait when nothing comes from p. The fix: wait for every signal sent.
    if (fixed || recv_counts[p] > 0) ctx.wait_signal(s, p, kA2aSem);
  }
  for (int p = 0; p < w; ++p) {
    if (p == me || recv_counts[p] == 0) continue;
    const Buffer slot = slot_of(p, recv_counts[p]);
    const Buffer out = out_of(p);
    ctx.launch(s, fmt::format("read{}_from{}", call, p), static_cast<uint64_t>(recv_counts[p]),
               kernels::CopyElems<int32_t>{out.as<int32_t>(), slot.as<int32_t>()},
               Access{{slot}, {out}});
  }
}

void alltoallv_skipped_wait(Context& ctx, bool fixed) {
  const int w = ctx.world_size(), me = ctx.rank();
  const Stream s = ctx.stream();
  const uint64_t window_elems = static_cast<uint64_t>(w) * kWindowSlot;
  // Every rank allocates the same symmetric buffers in the same order, so they share offsets. One
  // window per call, so call 1's puts never overwrite what call 0 reads.
  const std::array<Buffer, 2> windows{
      ctx.alloc("window0", bytes_of(window_elems, 4), MemPool::symmetric),
      ctx.alloc("window1", bytes_of(window_elems, 4), MemPool::symmetric)};
  std::array<Buffer, 2> received;
  for (int call = 0; call < 2; ++call) {
    int64_t total = 0;
    for (int p = 0; p < w; ++p) total += a2a_count(call, p, me, w);
    received[call] = ctx.alloc(fmt::format("received{}", call), bytes_of(total, 4));
    ctx.launch(s, fmt::format("init_window{}", call), window_elems,
               kernels::FillConst<int32_t>{windows[call].as<int32_t>(), -1},
               Access{{}, {windows[call]}});
  }
  // Every window is initialized before any peer puts into it.
  ctx.barrier(s);
  for (int call = 0; call < 2; ++call) {
    one_sided_all_to_all_v(ctx, call, windows[call], received[call], fixed);
  }
  ctx.output("received0", received[0], DType::i32);
  ctx.output("received1", received[1], DType::i32);
  if (!fixed) return;

  for (int call = 0; call < 2; ++call) {
    std::vector<int32_t> want;
    for (int p = 0; p < w; ++p) {
      const int64_t n = a2a_count(call, p, me, w);
      for (int64_t j = 0; j < n; ++j)
        want.push_back(a2a_base(call, p, me) + static_cast<int32_t>(j));
    }
    expect_equal(ctx.read<int32_t>(s, received[call]), want, fmt::format("received{}", call));
  }
}

// ---- 4. the record_stream class: freed while another stream reads, reused on a third ----

constexpr uint64_t kUafElems = 16384;  // the reader kernel's work

uint64_t activation_seed(uint64_t seed, int rank) {
  return seed + 7919 * static_cast<uint64_t>(rank);
}

void use_after_free(Context& ctx, bool fixed) {
  const uint64_t n = kUafElems, bytes = bytes_of(n, 4);
  const Stream main = ctx.stream();
  const Stream reader = ctx.create_stream("reader");
  const Buffer scaled = ctx.alloc("scaled", bytes, MemPool::device, reader);
  const Buffer a = ctx.alloc("activations", bytes, MemPool::device, main);
  ctx.launch(main, "produce", n,
             kernels::FillRandom<float>{a.as<float>(), activation_seed(ctx.seed(), ctx.rank())},
             Access{{}, {a}});
  ctx.wait(reader, ctx.record(main));
  ctx.launch(reader, "consume", n,
             kernels::Axpy{scaled.as<float>(), a.as<float>(), a.as<float>(), 2.0f},
             Access{{a}, {scaled}});
  // The fix (what record_stream makes the caching allocator do): the next user of a's bytes
  // waits for the reader.
  if (fixed) ctx.wait(main, ctx.record(reader));
  ctx.free(a);  // the host frees at once: the reader may not have run yet
  // Same size and pool: the allocator hands out a's bytes again (best_fit, the default placement).
  const Buffer b = ctx.alloc("next_activations", bytes, MemPool::device, main);
  ctx.launch(main, "produce_next", n, kernels::FillIota<float>{b.as<float>(), 1000.0f},
             Access{{}, {b}});
  ctx.output("scaled", scaled, DType::f32, {}, reader);
  ctx.output("next_activations", b, DType::f32, {}, main);
  if (!fixed) return;

  std::vector<float> ha(n), want_scaled(n), want_b(n);
  run_on_host(n, kernels::FillRandom<float>{ha.data(), activation_seed(ctx.seed(), ctx.rank())});
  run_on_host(n, kernels::Axpy{want_scaled.data(), ha.data(), ha.data(), 2.0f});
  run_on_host(n, kernels::FillIota<float>{want_b.data(), 1000.0f});
  expect_equal(ctx.read<float>(reader, scaled), want_scaled, "scaled");
  expect_equal(ctx.read<float>(main, b), want_b, "next_activations");
}

}  // namespace

CPRR_CASE(cp_maxlogit_race, "bug/cp_maxlogit_race",
          {.world_sizes = {2, 4},
           .description = "seed 001: the default stream folds max_logit_per_step[1], written on "
                          "cp_stream, into max_logit with no wait for cp_stream (the wait after "
                          "the loop is too late)",
           .seeded_bug = "stream_race"}) {
  cp_maxlogit(ctx, false);
}

CPRR_CASE(cp_maxlogit_race_fixed, "fixed/cp_maxlogit_race",
          {.world_sizes = {2, 4},
           .description = "the twin: the default stream waits for an event recorded after each "
                          "step's write before folding it into max_logit"}) {
  cp_maxlogit(ctx, true);
}

CPRR_CASE(pinned_staging_reuse, "bug/pinned_staging_reuse",
          {.world_sizes = {2, 4},
           .description = "seed 003: one pinned staging buffer reused for the four async H2D "
                          "copies of an all-to-all-v's counts and displacements; the host "
                          "overwrites it before a queued copy read it",
           .seeded_bug = "stream_race"}) {
  pinned_staging(ctx, false);
}

CPRR_CASE(pinned_staging_reuse_fixed, "fixed/pinned_staging_reuse",
          {.world_sizes = {2, 4},
           .description = "the twin: each H2D copy has a staging slice of its own"}) {
  pinned_staging(ctx, true);
}

CPRR_CASE(alltoallv_skipped_wait, "bug/alltoallv_skipped_wait",
          {.world_sizes = {2, 4},
           .description = "seed 003: a one-sided all-to-all-v skips the semaphore wait for a peer "
                          "it receives nothing from; the next call's wait returns on the old "
                          "signal and reads the window while the peer's put lands",
           .seeded_bug = "stream_race"}) {
  alltoallv_skipped_wait(ctx, false);
}

CPRR_CASE(alltoallv_skipped_wait_fixed, "fixed/alltoallv_skipped_wait",
          {.world_sizes = {2, 4},
           .description = "the twin: every signal is waited for, zero-sized receives included"}) {
  alltoallv_skipped_wait(ctx, true);
}

CPRR_CASE(use_after_free_across_streams, "bug/use_after_free_across_streams",
          {.world_sizes = {2, 4},
           .description = "a buffer freed while another stream still reads it; its bytes, "
                          "reallocated, are written on the default stream with no wait for the "
                          "reader (record_stream missing)",
           .seeded_bug = "stream_race"}) {
  use_after_free(ctx, false);
}

CPRR_CASE(use_after_free_across_streams_fixed, "fixed/use_after_free_across_streams",
          {.world_sizes = {2, 4},
           .description = "the twin: the writer waits for an event recorded on the reader after "
                          "the read before the buffer's bytes are reused"}) {
  use_after_free(ctx, true);
}

}  // namespace cprr

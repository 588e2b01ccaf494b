// Opaque library calls: work a case hands buffers to without knowing how it uses them (a fused
// kernel behind pybind, a vendor library's entry point), declared with Access::uses. Their
// accesses have no direction, so a race through one is a candidate that cpreplay's replays
// confirm or drop (analysis/happens_before.h, analysis/verdict.h):
// - bug/opaque_call_race: a library call on a side stream fills `out`, which the default stream
//   consumes with no wait for it. Fix: wait for an event recorded after the call.
// - healthy/opaque_calls_read_shared: two library calls on two streams are both handed the same
//   weights and only read them. A candidate in the op log (either call might write them), which
//   no replay shows: never a finding.
// - bug/opaque_race_behind_shared_reads: both at once, the shared reads first in report order:
//   the candidate no replay shows must not hide the one that races.
// - bug/opaque_call_lost_race: a library call that starts late (as behind a queue: on cpu it waits
//   until the default stream has consumed, by a host signal the op log does not see) fills `out`
//   on a side stream, which the default stream consumes at once. The consumer wins every time, by
//   construction: every recorded run has the same wrong outputs, and the replays' delays only keep
//   that order. Holding the consumer until the call completed (the fix applied) shows the race
//   and the order the recorded runs took.
// The bug case checks nothing the race can break; the others check their results against host
// references, the same on every run and backend.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {
namespace {

constexpr uint64_t kElems = 1 << 14;

// What a late library call waits for on the host: set by a native op the default stream runs
// after its consumer, so the op log holds no order between the two.
using Signal = std::shared_ptr<std::atomic<bool>>;
// How long a late call waits for its signal at most: a replay that holds the consumer until the
// call completed (the fix applied) never sets it first, and the call must go on then.
constexpr std::chrono::seconds kLateLimit{5};

// An opaque library call: runs `f` over [0, n) on the native stream it is handed (a grid on cuda,
// a loop on the host on cpu), declaring only the buffers it is given, not how it uses them.
// `after`: on the host, the call first waits until it is set (up to kLateLimit).
template <class F>
void library_call(Context& ctx, Stream s, std::string name, uint64_t n, F f,
                  std::vector<Buffer> given, Signal after = nullptr) {
  ctx.native(s, std::move(name), Access{.uses = std::move(given)}, [f, n, after](void* stream) {
    if (stream != nullptr) {
#if CPRR_HAVE_CUDA
      kernels::device_launch(f, n, stream);
#endif
      return;
    }
    const auto until = std::chrono::steady_clock::now() + kLateLimit;
    while (after && !after->load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(100));  // why: the signal's poll
    if (after && !after->load()) {  // held consumer (the fix applied), or a consumer this late
      std::fprintf(stderr, "late library call: no signal from the consumer in %lld s; going on\n",
                   static_cast<long long>(kLateLimit.count()));
    }
    for (uint64_t i = 0; i < n; ++i) f(i);
  });
}

struct Weights {
  Buffer weights;
  Buffer bias;
};

// The weights (random per rank and seed) and a bias of ones, written on the default stream; the
// streams in `users` wait for them.
Weights fill_weights(Context& ctx, const std::vector<Stream>& users) {
  const Stream main = ctx.stream();
  const Weights w{ctx.alloc("weights", kElems * 4), ctx.alloc("bias", kElems * 4)};
  ctx.launch(main, "fill_weights", kElems,
             kernels::FillRandom<float>{w.weights.as<float>(),
                                        ctx.seed() + 7 * static_cast<uint64_t>(ctx.rank())},
             Access{{}, {w.weights}});
  ctx.launch(main, "fill_bias", kElems, kernels::FillConst<float>{w.bias.as<float>(), 1.0f},
             Access{{}, {w.bias}});
  const Event filled = ctx.record(main);
  for (const Stream s : users) ctx.wait(s, filled);
  return w;
}

// A library call on `s` handed the weights and a new buffer `out_name`, into which it copies
// them (what it does with either, the op log does not know).
Buffer copy_weights(Context& ctx, Stream s, const char* name, const char* out_name,
                    const Weights& w) {
  const Buffer out = ctx.alloc(out_name, kElems * 4);
  library_call(ctx, s, name, kElems,
               kernels::CopyElems<float>{out.as<float>(), w.weights.as<float>()}, {w.weights, out});
  return out;
}

// result[i] = a[i] + b[i] on the default stream, output and (when `check`) compared with
// weights[i] * scale + offset.
void consume(Context& ctx, const Weights& w, Buffer a, Buffer b, float scale, float offset,
             bool check) {
  const Stream main = ctx.stream();
  const Buffer result = ctx.alloc("result", kElems * 4);
  ctx.launch(main, "consume", kElems,
             kernels::Axpy{result.as<float>(), a.as<float>(), b.as<float>(), 1.0f},
             Access{{a, b}, {result}});
  ctx.output("result", result, DType::f32, {}, main);
  if (!check) return;
  const std::vector<float> weights = ctx.read<float>(main, w.weights);
  const std::vector<float> got = ctx.read<float>(main, result);
  for (uint64_t i = 0; i < kElems; i += 61) {
    const float want = weights[i] * scale + offset;
    CPRR_EXPECT(got[i] == want, "result[{}] = {}, expected {}", i, got[i], want);
  }
}

// Two library calls read the weights on two side streams, one into `out_a`, which the default
// stream waits for, the other into `out`, which it waits for only when `fixed`.
void race_behind_shared_reads(Context& ctx, bool fixed) {
  const Stream main = ctx.stream();
  const Stream a = ctx.create_stream("lib_a");
  const Stream lib = ctx.create_stream("lib_stream");
  const Weights w = fill_weights(ctx, {a, lib});
  const Buffer out_a = copy_weights(ctx, a, "lib_copy_a", "out_a", w);
  const Buffer out = copy_weights(ctx, lib, "lib_copy", "out", w);
  ctx.wait(main, ctx.record(a));
  if (fixed) ctx.wait(main, ctx.record(lib));  // the bug: none
  consume(ctx, w, out, out_a, 2.0f, 0.0f, fixed);
}

// `out` zeroed on the default stream first (so every run reads the same bytes when it reads
// early), then copied into late by the library call; the default stream consumes it.
void lost_race(Context& ctx, bool fixed) {
  const Stream main = ctx.stream();
  const Stream lib = ctx.create_stream("lib_stream");
  const Weights w = fill_weights(ctx, {lib});
  const Buffer out = ctx.alloc("out", kElems * 4);
  ctx.launch(main, "zero_out", kElems, kernels::FillConst<float>{out.as<float>(), 0.0f},
             Access{{}, {out}});
  ctx.wait(lib, ctx.record(main));
  // The twin waits for the call before consuming: its call must not wait for the consumer.
  const Signal consumed = fixed ? nullptr : std::make_shared<std::atomic<bool>>(false);
  library_call(ctx, lib, "lib_copy_late", kElems,
               kernels::CopyElems<float>{out.as<float>(), w.weights.as<float>()}, {w.weights, out},
               consumed);
  if (fixed) ctx.wait(main, ctx.record(lib));  // the bug: none
  consume(ctx, w, out, w.bias, 1.0f, 1.0f, fixed);
  if (consumed)
    ctx.native(main, "consumed", Access{}, [consumed](void*) { consumed->store(true); });
}

void opaque_call(Context& ctx, bool fixed) {
  const Stream main = ctx.stream();
  const Stream lib = ctx.create_stream("lib_stream");
  const Weights w = fill_weights(ctx, {lib});
  const Buffer out = copy_weights(ctx, lib, "lib_copy", "out", w);
  if (fixed) ctx.wait(main, ctx.record(lib));  // the bug: none
  consume(ctx, w, out, w.bias, 1.0f, 1.0f, fixed);
}

}  // namespace

CPRR_CASE(opaque_call_race, "bug/opaque_call_race",
          {.world_sizes = {2},
           .description = "a library call handed `out` on a side stream fills it; the default "
                          "stream consumes it with no wait for the call",
           .seeded_bug = "stream_race"}) {
  opaque_call(ctx, false);
}

CPRR_CASE(opaque_call_race_fixed, "fixed/opaque_call_race",
          {.world_sizes = {2},
           .description = "the twin: the default stream waits for an event recorded after the "
                          "library call"}) {
  opaque_call(ctx, true);
}

CPRR_CASE(opaque_calls_read_shared, "healthy/opaque_calls_read_shared",
          {.world_sizes = {2},
           .description = "two library calls on two streams handed the same weights, which both "
                          "only read"}) {
  const Stream main = ctx.stream();
  const Stream a = ctx.create_stream("lib_a");
  const Stream b = ctx.create_stream("lib_b");
  const Weights w = fill_weights(ctx, {a, b});
  const Buffer out_a = copy_weights(ctx, a, "lib_copy_a", "out_a", w);
  const Buffer out_b = copy_weights(ctx, b, "lib_copy_b", "out_b", w);
  ctx.wait(main, ctx.record(a));
  ctx.wait(main, ctx.record(b));
  consume(ctx, w, out_a, out_b, 2.0f, 0.0f, true);
}

CPRR_CASE(opaque_race_behind_shared_reads, "bug/opaque_race_behind_shared_reads",
          {.world_sizes = {2},
           .description = "two library calls read the weights on two side streams; the default "
                          "stream waits for one, and consumes the other's output with no wait",
           .seeded_bug = "stream_race"}) {
  race_behind_shared_reads(ctx, false);
}

CPRR_CASE(opaque_race_behind_shared_reads_fixed, "fixed/opaque_race_behind_shared_reads",
          {.world_sizes = {2},
           .description = "the twin: the default stream waits for both library calls"}) {
  race_behind_shared_reads(ctx, true);
}

CPRR_CASE(opaque_call_lost_race, "bug/opaque_call_lost_race",
          {.world_sizes = {2},
           .description = "a library call that starts late fills `out` on a side stream; the "
                          "default stream consumes it at once, first every time",
           .seeded_bug = "stream_race"}) {
  lost_race(ctx, false);
}

CPRR_CASE(opaque_call_lost_race_fixed, "fixed/opaque_call_lost_race",
          {.world_sizes = {2},
           .description = "the twin: the default stream waits for the late library call"}) {
  lost_race(ctx, true);
}

}  // namespace cprr

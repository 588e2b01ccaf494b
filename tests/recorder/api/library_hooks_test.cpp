// LibraryHooks: a case's own library (a Python case's torch ops) in its Context, in-process on a
// world-of-one CPU backend: ops on the library's streams with their byte spans, tensors made and
// written by an op, frees, ordering ops, a replay's sync requests, and what the race check makes
// of such a log.
#include "recorder/api/library_hooks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/happens_before.h"
#include "analysis/op_accesses.h"
#include "analysis/race_check.h"
#include "analysis/uninit_check.h"
#include "recorder/api/context.h"
#include "tests/recorder/api/context_support.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;

using test::case_failure_of;
using test::make_state;

std::size_t races_in(const CaseCapture& c) {
  return check_happens_before(ops_from_captures({&c})).race_count;
}

TEST(LibraryHooks, OpsLogTheirStreamKindAndSpansAndMadeTensorsJoinTheirWrites) {
  RankState state = make_state();
  Context ctx(state, "lib", {}, 1, Placement::best_fit);
  LibraryHooks hooks(ctx);
  std::vector<std::byte> memory(64);
  const uint32_t a = hooks.track_memory("a", memory.data(), 32, false);
  const LibraryHooks::LibraryOp made =
      hooks.library_op("kernel", "aten.mul", 3, nullptr, {{a, ByteSpan{8, 8}}}, {});
  const uint32_t b = hooks.track_memory("b", memory.data() + 32, 32, false, nullptr,
                                        static_cast<int64_t>(made.seq));
  const LibraryHooks::LibraryOp host =
      hooks.library_op("host", "aten.fill_", -1, nullptr, {}, {{a, ByteSpan{0, 32}}});
  hooks.untrack_memory(b, 3);
  ctx.drain();
  const CaseCapture c = ctx.finish();

  ASSERT_EQ(c.ops.size(), 2u);
  EXPECT_EQ(made.seq, 0u);
  EXPECT_EQ(host.seq, 1u);
  EXPECT_FALSE(made.sync_after);
  const OpRecord& mul = c.ops[0];
  EXPECT_EQ(mul.stream, 3);
  EXPECT_EQ(mul.kind, "kernel");
  EXPECT_EQ(mul.reads, std::vector<uint32_t>{a});
  EXPECT_EQ(mul.read_spans, std::vector<ByteSpan>{(ByteSpan{8, 8})});
  EXPECT_EQ(mul.writes, std::vector<uint32_t>{b});  // the tensor it made, whole
  EXPECT_EQ(mul.write_spans, std::vector<ByteSpan>{(ByteSpan{0, 32})});
  EXPECT_EQ(c.ops[1].stream, -1);
  EXPECT_EQ(c.ops[1].kind, "host");

  ASSERT_EQ(c.allocs.size(), 3u);
  EXPECT_EQ(c.allocs[0].pool, "tensor");
  EXPECT_EQ(c.allocs[0].offset, reinterpret_cast<uint64_t>(memory.data()));
  EXPECT_TRUE(c.allocs[2].is_free);
  EXPECT_EQ(c.allocs[2].buffer, b);
  EXPECT_EQ(c.allocs[2].stream, 3);
}

TEST(LibraryHooks, TorchSymmetricMemoryIsLoggedAtItsPlaceInTheWindowsAndFreedLikeATensor) {
  RankState state = make_state();
  Context ctx(state, "lib", {}, 1, Placement::best_fit);
  LibraryHooks hooks(ctx);
  std::vector<std::byte> memory(64);
  const uint32_t s = hooks.track_memory("s", memory.data(), 64, false, nullptr, -1, 2097152);
  const LibraryHooks::LibraryOp reads =
      hooks.library_op("kernel", "aten.sum", 0, nullptr, {{s, ByteSpan{0, 64}}}, {});
  hooks.untrack_memory(s, 0);
  ctx.drain();
  const CaseCapture c = ctx.finish();
  ASSERT_EQ(c.allocs.size(), 2u);
  EXPECT_EQ(c.allocs[0].pool, "torch_symmetric");
  EXPECT_EQ(c.allocs[0].offset, 2097152u);  // its place in the windows, not its address
  EXPECT_TRUE(c.allocs[1].is_free);
  EXPECT_EQ(c.ops[reads.seq].reads, std::vector<uint32_t>{s});
  // Nothing wrote it (an empty): the uninitialized-read check sees the read in its pool.
  const auto u = check_uninitialized_reads({&c});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->pool, "torch_symmetric");
}

TEST(LibraryHooks, BadTracksFreesAndOrderingOpsAreCaseFailures) {
  RankState state = make_state();
  Context ctx(state, "lib", {}, 1, Placement::best_fit);
  LibraryHooks hooks(ctx);
  std::vector<std::byte> memory(16);
  EXPECT_THAT(
      case_failure_of([&] { hooks.track_memory("t", memory.data(), 16, false, nullptr, 0); }),
      HasSubstr("op #0, which is not logged yet"));
  EXPECT_THAT(case_failure_of([&] { hooks.untrack_memory(9, 0); }), HasSubstr("buffer 9"));
  const uint32_t t = hooks.track_memory("t", memory.data(), 16, false);
  hooks.untrack_memory(t, 0);
  EXPECT_THAT(case_failure_of([&] { hooks.untrack_memory(t, 0); }), HasSubstr("still live"));
  EXPECT_THAT(case_failure_of([&] { hooks.library_order("launch", "x", 0, 1); }),
              HasSubstr("not record, wait or sync"));
  EXPECT_THAT(case_failure_of([&] { hooks.library_order("record", "x", -1, 1); }),
              HasSubstr("needs a stream and an event"));
  EXPECT_THAT(case_failure_of([&] { hooks.library_order("wait", "x", 0, -1); }),
              HasSubstr("needs an event"));
  ctx.drain();
  ctx.finish();
}

TEST(LibraryHooks, AReplaysSyncAfterNamesTheOpsTheCallerMustSynchronizeAfter) {
  RankState state = make_state();
  Perturbation p;
  p.sync_after = {OpSite{0, 1}, OpSite{1, 2}};  // op #1 of this rank; op #2 of another rank
  Context ctx(state, "lib", {}, 1, Placement::best_fit, 0, p);
  LibraryHooks hooks(ctx);
  std::vector<bool> sync;
  for (int i = 0; i < 3; ++i)
    sync.push_back(hooks.library_op("kernel", "op", 0, nullptr, {}, {}).sync_after);
  EXPECT_EQ(sync, (std::vector<bool>{false, true, false}));
  hooks.synchronize_library();  // the cpu backend waits for its streams
  ctx.drain();
  ctx.finish();

  Perturbation serial;
  serial.one_stream = true;
  Context every(state, "lib", {}, 1, Placement::best_fit, 0, serial);
  EXPECT_TRUE(LibraryHooks(every).library_op("kernel", "op", 0, nullptr, {}, {}).sync_after);
  every.drain();
  every.finish();
}

CollectiveRecord call_in(uint32_t group, const char* kind) {
  CollectiveRecord c;
  c.kind = kind;
  c.stream = -1;
  c.group = group;
  return c;
}

// A collective that raised (a timeout the test expects) is no collective of a case that ends
// clean: it leaves the collective log, later calls on its group move down a number, and its op
// entry stays at its seq as a plain op. A case that failed keeps it (the failure's evidence).
TEST(LibraryHooks, ACollectiveThatRaisedLeavesTheLogOfACleanCaseAndLaterCallsMoveDown) {
  RankState state = make_state();
  for (const bool clean : {true, false}) {
    SCOPED_TRACE(clean ? "clean" : "failed");
    Context ctx(state, "lib", {}, 1, Placement::best_fit);
    LibraryHooks hooks(ctx);
    const uint64_t world = hooks.enter_collective(call_in(0, "all_reduce"));
    const uint64_t timed_out = hooks.enter_collective(call_in(3, "barrier"));
    hooks.collective_raised(timed_out);
    const uint64_t after = hooks.enter_collective(call_in(3, "all_reduce"));
    for (const uint64_t h : {world, after}) hooks.complete_collective(h);
    EXPECT_THAT(case_failure_of([&] { hooks.collective_raised(9); }),
                HasSubstr("no collective #9 was entered"));
    ctx.drain();
    const CaseCapture c = ctx.finish(clean);
    std::vector<std::tuple<uint32_t, std::string, uint64_t>> log;
    for (const CollectiveRecord& r : c.collectives) log.emplace_back(r.group, r.kind, r.seq);
    std::vector<std::tuple<std::string, int64_t, uint64_t>> ops;
    for (const OpRecord& op : c.ops) ops.emplace_back(op.kind, op.event, op.epoch);
    if (clean) {
      EXPECT_EQ(log, (decltype(log){{0, "all_reduce", 0}, {3, "all_reduce", 0}}));
      EXPECT_EQ(ops, (decltype(ops){{"collective", 0, 0}, {"host", -1, 0}, {"collective", 3, 0}}));
      EXPECT_THAT(c.ops[1].name, HasSubstr("barrier (raised: not a collective of the log)"));
    } else {
      EXPECT_EQ(log, (decltype(log){
                         {0, "all_reduce", 0}, {3, "barrier", 0}, {3, "all_reduce", 1}}));
      EXPECT_EQ(ops, (decltype(ops){
                         {"collective", 0, 0}, {"collective", 3, 0}, {"collective", 3, 1}}));
    }
  }
}

TEST(LibraryHooks, OnlyUnwrittenTensorsArePoisoned) {
  RankState state = make_state();
  Perturbation p;
  p.poison = 0xABABABABABABABABull;
  Context ctx(state, "lib", {}, 1, Placement::best_fit, 0, p);
  LibraryHooks hooks(ctx);
  std::vector<std::byte> empty(16, std::byte{0}), made(16, std::byte{7});
  hooks.track_memory("empty", empty.data(), 16, false);
  const uint64_t seq = hooks.library_op("kernel", "aten.ones", 0, nullptr, {}, {}).seq;
  hooks.track_memory("made", made.data(), 16, false, nullptr, static_cast<int64_t>(seq));
  EXPECT_EQ(empty[0], std::byte{0xAB});
  EXPECT_EQ(made[0], std::byte{7});  // its op wrote it: poisoning it would undo that
  ctx.drain();
  ctx.finish();
}

// A library's stream 1 writes a tensor stream 0 then reads: a race, unless an event recorded on
// stream 1 is waited for on stream 0; memory reused after a free is the same bytes.
TEST(LibraryHooks, TheRaceCheckOrdersLibraryOpsByTheirEventsWaitsAndSyncs) {
  std::vector<std::byte> memory(64);
  const auto run = [&](const std::function<void(LibraryHooks&, uint32_t)>& between) {
    RankState state = make_state();
    Context ctx(state, "lib", {}, 1, Placement::best_fit);
    LibraryHooks hooks(ctx);
    const uint32_t x = hooks.track_memory("x", memory.data(), 64, false);
    hooks.library_op("kernel", "write x", 1, nullptr, {}, {{x, ByteSpan{0, 64}}});
    between(hooks, x);
    hooks.library_op("kernel", "read x", 0, nullptr, {{x, ByteSpan{0, 64}}}, {});
    ctx.drain();
    return ctx.finish();
  };
  EXPECT_EQ(races_in(run([](LibraryHooks&, uint32_t) {})), 1u);
  EXPECT_EQ(races_in(run([](LibraryHooks& c, uint32_t) {
              c.library_order("record", "event.record", 1, 0);
              c.library_order("wait", "wait_stream", 0, 0);
            })),
            0u);
  EXPECT_EQ(races_in(run([](LibraryHooks& c, uint32_t) {
              c.library_order("record", "event.record", 1, 4);
              c.library_order("wait", "event.synchronize", -1, 4);  // the host waits
            })),
            0u);
  EXPECT_EQ(
      races_in(run([](LibraryHooks& c, uint32_t) { c.library_order("sync", "synchronize", -1); })),
      0u);
  // Freed and made anew at the same address: another buffer, the same bytes.
  EXPECT_EQ(races_in(run([&](LibraryHooks& c, uint32_t x) {
              c.untrack_memory(x, 1);
              const uint64_t seq = c.library_op("kernel", "aten.full", 0, nullptr, {}, {}).seq;
              c.track_memory("y", memory.data(), 64, false, nullptr, static_cast<int64_t>(seq));
            })),
            2u);  // full and the read both meet the write on stream 1
}

// Two tensors each written on stream 1 and read on stream 0 without a wait: two races. The
// finding is the first; the other is kept beside it (its ops and bytes), for the report, once
// however many ranks have it.
TEST(LibraryHooks, TheRaceCheckKeepsTheExecutionsOtherRacesBesideTheFirst) {
  std::vector<std::byte> memory(128);
  RankState state = make_state();
  Context ctx(state, "lib", {}, 1, Placement::best_fit);
  LibraryHooks hooks(ctx);
  const uint32_t x = hooks.track_memory("x", memory.data(), 64, false);
  const uint32_t y = hooks.track_memory("y", memory.data() + 64, 64, false);
  for (const uint32_t buffer : {x, y}) {
    hooks.library_op("kernel", buffer == x ? "write x" : "write y", 1, nullptr, {},
                     {{buffer, {0, 64}}});
    hooks.library_op("kernel", buffer == x ? "read x" : "read y", 0, nullptr, {{buffer, {0, 64}}},
                     {});
  }
  ctx.drain();
  ExecutionResult e;
  e.status = ExecStatus::pass;
  e.ranks.emplace_back().done.emplace().capture = ctx.finish();
  const std::optional<RaceFinding> race = find_race({&e});
  ASSERT_TRUE(race.has_value());
  EXPECT_EQ(race->race.second.name, "read x");
  ASSERT_EQ(race->others.size(), 1u);
  EXPECT_EQ(race->others[0].race.first.name, "write y");
  EXPECT_EQ(race->others[0].race.second.name, "read y");
  EXPECT_THAT(describe_race(race->others[0]), HasSubstr("race on bytes [0, 64) of 'y'"));
  EXPECT_TRUE(race->others[0].same_on_ranks.empty());
  // A second rank running the same code has the same two races: still one other, on both ranks.
  e.ranks.push_back(e.ranks[0]);
  const std::optional<RaceFinding> both = find_race({&e});
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->race.first.rank, 0);
  ASSERT_EQ(both->others.size(), 1u);
  EXPECT_EQ(both->others[0].same_on_ranks, std::vector<int32_t>{1});
}

// A case whose library has 256 bytes of host memory to track: address(at) is byte `at`'s.
struct HostBytes {
  RankState state = make_state();
  Context ctx{state, "lib", {}, 1, Placement::best_fit};
  LibraryHooks hooks{ctx};
  std::vector<std::byte> memory = std::vector<std::byte>(256);
  uint64_t address(std::size_t at) { return reinterpret_cast<uint64_t>(&memory[at]); }
};

// A fake launch stream: kernels seen only as launches, their accesses inferred from their
// pointer parameters over the tracked tensors. Two launches on two streams handed one tensor are
// a race candidate; the tensor freed, its address names nothing any more.
TEST(LibraryHooks, LaunchesPastTheDispatcherTouchWhatTheirPointersNameAsCandidates) {
  HostBytes h;
  const uint32_t x = h.hooks.track_memory("x", h.memory.data(), 128, false);
  const uint32_t y = h.hooks.track_memory("y", h.memory.data() + 128, 64, false);
  const auto launch = [&](const char* name, int stream, std::vector<uint64_t> words) {
    std::vector<std::byte> values(words.size() * 8);
    std::memcpy(values.data(), words.data(), values.size());
    std::vector<KernelParam> layout;
    for (std::size_t i = 0; i < words.size(); ++i) layout.push_back(KernelParam{8 * i, 8});
    return h.hooks.library_launch(name, stream, nullptr, layout, values);
  };
  launch("triton_scale", 1, {h.address(64), 4096});
  const uint32_t z = h.hooks.track_memory("z", h.memory.data() + 192, 64, false);  // after a launch
  launch("triton_sum", 2, {h.address(0), h.address(128)});
  h.hooks.untrack_memory(y, 2);
  launch("after_free", 3, {h.address(128), h.address(200)});
  h.ctx.drain();
  const CaseCapture c = h.ctx.finish();

  ASSERT_EQ(c.ops.size(), 3u);
  EXPECT_EQ(c.ops[0].kind, "kernel");
  EXPECT_EQ(c.ops[0].name, "triton_scale");
  EXPECT_TRUE(c.ops[0].reads.empty() && c.ops[0].writes.empty());
  EXPECT_EQ(c.ops[0].touches, std::vector<uint32_t>{x});
  EXPECT_EQ(c.ops[0].touch_spans, std::vector<ByteSpan>{(ByteSpan{64, 64})});
  EXPECT_EQ(c.ops[1].touches, (std::vector<uint32_t>{x, y}));
  EXPECT_EQ(c.ops[1].touch_spans, (std::vector<ByteSpan>{{0, 128}, {0, 64}}));
  EXPECT_EQ(c.ops[2].touches, std::vector<uint32_t>{z}) << "y was freed, z tracked since";
  EXPECT_EQ(c.ops[2].touch_spans, std::vector<ByteSpan>{(ByteSpan{8, 56})});
  const HbResult r = check_happens_before(ops_from_captures({&c}));
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_TRUE(r.races[0].candidate);
  EXPECT_EQ(r.races[0].first.name, "triton_scale");
  EXPECT_EQ(r.races[0].second.name, "triton_sum");
  EXPECT_EQ(r.races[0].overlaps.at(0).begin, h.address(64))
      << "a tensor's bytes are at its address";
}

// Copies and memsets past the dispatcher (cudaMemcpyAsync through ctypes) are exact: a copy
// reads its source and writes its destination, only moving bytes; a memset only writes. A copy
// racing with a reader of its destination is a race, not a candidate.
TEST(LibraryHooks, CopiesPastTheDispatcherReadAndWriteTheirExactExtent) {
  HostBytes h;
  const uint32_t x = h.hooks.track_memory("x", h.memory.data(), 128, false);
  const uint32_t y = h.hooks.track_memory("y", h.memory.data() + 128, 128, false);
  h.hooks.library_copy("cudaMemsetAsync", 1, nullptr, h.address(0), 0, 128, true);
  h.hooks.library_copy("cudaMemcpyAsync", 1, nullptr, h.address(160), h.address(16), 32, false);
  h.hooks.library_op("kernel", "aten.sum", 2, nullptr, {{y, ByteSpan{0, 64}}}, {});
  std::vector<std::byte> untracked(64);
  EXPECT_FALSE(h.hooks.library_copy("cudaMemcpyAsync", 1, nullptr,
                                    reinterpret_cast<uint64_t>(untracked.data()),
                                    reinterpret_cast<uint64_t>(untracked.data()) + 32, 32, false))
      << "memory cprr does not know: not an op (work outside the op log)";
  h.ctx.drain();
  const CaseCapture c = h.ctx.finish();

  ASSERT_EQ(c.ops.size(), 3u);
  EXPECT_EQ(c.ops[0].kind, "copy");
  EXPECT_TRUE(c.ops[0].reads.empty());
  EXPECT_EQ(c.ops[0].writes, std::vector<uint32_t>{x});
  EXPECT_EQ(c.ops[0].write_spans, std::vector<ByteSpan>{(ByteSpan{0, 128})});
  EXPECT_FALSE(c.ops[0].moves) << "a memset writes its own value";
  EXPECT_EQ(c.ops[1].reads, std::vector<uint32_t>{x});
  EXPECT_EQ(c.ops[1].read_spans, std::vector<ByteSpan>{(ByteSpan{16, 32})});
  EXPECT_EQ(c.ops[1].writes, std::vector<uint32_t>{y});
  EXPECT_EQ(c.ops[1].write_spans, std::vector<ByteSpan>{(ByteSpan{32, 32})});
  EXPECT_TRUE(c.ops[1].moves);
  EXPECT_TRUE(c.ops[1].touches.empty());
  const HbResult r = check_happens_before(ops_from_captures({&c}));
  ASSERT_EQ(r.races.size(), 1u);
  EXPECT_FALSE(r.races[0].candidate) << "both directions known";
  EXPECT_EQ(r.races[0].first.name, "cudaMemcpyAsync");
  EXPECT_EQ(r.races[0].second.name, "aten.sum");
}

// A CUDA graph captured on stream 2 (x * 2 into y, y a tensor its op made) runs at its launches,
// not at its capture: the capture logs "captured" ops that touch nothing and get no replay's sync
// (a sync would break the capture), and each launch logs the graph's ops on its own stream.
TEST(LibraryHooks, AGraphsOpsRunAtItsLaunchesOnTheLaunchStreamNotAtItsCapture) {
  std::vector<std::byte> memory(128);
  RankState state = make_state();
  Perturbation serial;
  serial.one_stream = true;  // every op asks for a sync after it
  Context ctx(state, "lib", {}, 1, Placement::best_fit, 0, serial);
  LibraryHooks hooks(ctx);
  const uint32_t x = hooks.track_memory("x", memory.data(), 64, false);
  hooks.begin_graph_capture(2);
  const LibraryHooks::LibraryOp mul =
      hooks.library_op("kernel", "aten.mul", 2, nullptr, {{x, ByteSpan{0, 64}}}, {});
  const uint32_t y = hooks.track_memory("y", memory.data() + 64, 64, false, nullptr,
                                        static_cast<int64_t>(mul.seq));
  const LibraryHooks::LibraryOp other =
      hooks.library_op("kernel", "aten.neg", 1, nullptr, {{x, ByteSpan{0, 64}}}, {});
  EXPECT_EQ(hooks.end_graph_capture(2), 0u);
  EXPECT_FALSE(mul.sync_after);
  EXPECT_TRUE(other.sync_after);  // stream 1 was not captured
  const std::optional<LibraryHooks::LibraryOp> launch = hooks.launch_graph(0, 3, nullptr);
  ASSERT_TRUE(launch.has_value());
  EXPECT_TRUE(launch->sync_after);
  ctx.drain();
  const CaseCapture c = ctx.finish();

  ASSERT_EQ(c.ops.size(), 3u);
  EXPECT_EQ(c.ops[0].kind, "captured");
  EXPECT_EQ(c.ops[0].name, "kernel aten.mul");
  EXPECT_TRUE(c.ops[0].reads.empty());
  EXPECT_TRUE(c.ops[0].writes.empty());  // y's write went to the graph
  EXPECT_EQ(c.ops[1].stream, 1);
  const OpRecord& run = c.ops[2];
  EXPECT_EQ(launch->seq, 2u);
  EXPECT_EQ(run.kind, "kernel");
  EXPECT_EQ(run.name, "aten.mul in graph #0");
  EXPECT_EQ(run.stream, 3);
  EXPECT_EQ(run.reads, std::vector<uint32_t>{x});
  EXPECT_EQ(run.writes, std::vector<uint32_t>{y});
  EXPECT_EQ(run.write_spans, std::vector<ByteSpan>{(ByteSpan{0, 64})});
}

// The graph's launch meets the rest of the case as CUDA orders it: a launch on a side stream
// whose output stream 0 reads without a wait races; a wait, or a launch on stream 0, does not.
// The capture itself, on its own stream between the write and the read, orders and races with
// nothing.
TEST(LibraryHooks, TheRaceCheckSeesAGraphWhereItIsLaunched) {
  std::vector<std::byte> memory(128);
  const auto run = [&](int launch_stream, bool wait) {
    RankState state = make_state();
    Context ctx(state, "lib", {}, 1, Placement::best_fit);
    LibraryHooks hooks(ctx);
    const uint32_t x = hooks.track_memory("x", memory.data(), 64, false);
    const uint32_t y = hooks.track_memory("y", memory.data() + 64, 64, false);
    hooks.begin_graph_capture(2);
    hooks.library_op("kernel", "aten.mul", 2, nullptr, {{x, ByteSpan{0, 64}}},
                     {{y, ByteSpan{0, 64}}});
    hooks.end_graph_capture(2);
    hooks.library_op("kernel", "aten.fill_", 0, nullptr, {}, {{x, ByteSpan{0, 64}}});
    if (launch_stream != 0) {
      hooks.library_order("record", "record", 0, 0);
      hooks.library_order("wait", "wait", launch_stream, 0);
    }
    hooks.launch_graph(0, launch_stream, nullptr);
    if (wait) {
      hooks.library_order("record", "record", launch_stream, 1);
      hooks.library_order("wait", "wait", 0, 1);
    }
    hooks.library_op("kernel", "aten.sum", 0, nullptr, {{y, ByteSpan{0, 64}}}, {});
    ctx.drain();
    return ctx.finish();
  };
  EXPECT_EQ(races_in(run(3, false)), 1u);
  EXPECT_EQ(races_in(run(3, true)), 0u);
  EXPECT_EQ(races_in(run(0, false)), 0u);
}

// A stream that waits for an event recorded inside the capture is forked into it: its ops are
// the graph's too, and the orderings inside the graph are dropped at its launch.
TEST(LibraryHooks, AStreamForkedIntoACaptureIsCapturedAndTheGraphsOrderingsStayInside) {
  std::vector<std::byte> memory(64);
  RankState state = make_state();
  Context ctx(state, "lib", {}, 1, Placement::best_fit);
  LibraryHooks hooks(ctx);
  const uint32_t x = hooks.track_memory("x", memory.data(), 64, false);
  hooks.begin_graph_capture(2);
  hooks.library_order("record", "fork", 2, 7);
  hooks.library_order("wait", "fork", 4, 7);
  hooks.library_op("kernel", "aten.add_", 4, nullptr, {}, {{x, ByteSpan{0, 64}}});
  hooks.library_order("record", "join", 4, 8);
  hooks.library_order("wait", "join", 2, 8);
  hooks.end_graph_capture(2);
  hooks.library_op("kernel", "aten.neg", 4, nullptr, {}, {{x, ByteSpan{0, 64}}});  // after: runs
  hooks.launch_graph(0, 0, nullptr);
  ctx.drain();
  const CaseCapture c = ctx.finish();

  ASSERT_EQ(c.ops.size(), 7u);
  for (std::size_t k = 0; k < 5; ++k) EXPECT_EQ(c.ops[k].kind, "captured") << k;
  EXPECT_EQ(c.ops[1].name, "wait fork");
  EXPECT_EQ(c.ops[5].kind, "kernel");
  EXPECT_EQ(c.ops[5].stream, 4);
  EXPECT_EQ(c.ops[6].name, "aten.add_ in graph #0");
  EXPECT_EQ(c.ops[6].stream, 0);
  EXPECT_EQ(races_in(c), 1u);  // stream 4's neg and the launch's add_ on stream 0
}

TEST(LibraryHooks, GraphCapturesOutOfOrderAndUnknownGraphsAreCaseFailures) {
  RankState state = make_state();
  Context ctx(state, "lib", {}, 1, Placement::best_fit);
  LibraryHooks hooks(ctx);
  EXPECT_THAT(case_failure_of([&] { hooks.end_graph_capture(2); }), HasSubstr("none is open"));
  EXPECT_THAT(case_failure_of([&] { hooks.launch_graph(0, 0, nullptr); }),
              HasSubstr("graph #0 was not captured in this case"));
  hooks.begin_graph_capture(2);
  EXPECT_THAT(case_failure_of([&] { hooks.begin_graph_capture(3); }),
              HasSubstr("one capture at a time"));
  EXPECT_EQ(hooks.end_graph_capture(2), 0u);
  EXPECT_FALSE(hooks.launch_graph(0, 0, nullptr).has_value());  // an empty graph logs nothing
  ctx.drain();
  ctx.finish();
}

TEST(LibraryHooks, WorkOutsideTheOpLogIsNotedByTheRaceCheck) {
  RankState state = make_state();
  Context ctx(state, "lib", {}, 1, Placement::best_fit);
  LibraryHooks hooks(ctx);
  hooks.library_unseen("3 outside the op log: 3 kernel launches no op the dispatcher saw made");
  ctx.drain();
  ExecutionResult e;
  e.status = ExecStatus::pass;
  e.ranks.emplace_back().done.emplace().capture = ctx.finish();
  EXPECT_EQ(e.ranks[0].done->capture.ops.at(0).kind, "unseen");
  std::vector<std::string> notes;
  EXPECT_FALSE(find_race({&e}, &notes).has_value());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0], HasSubstr("rank 0: 3 outside the op log: 3 kernel launches"));
  EXPECT_THAT(notes[0], HasSubstr("no race, uninitialized-read or layout check sees that work"));
}

}  // namespace
}  // namespace cprr

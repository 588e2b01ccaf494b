// cprr::Context in-process, on a world-of-one CPU backend (no rendezvous, no worker process):
// the allocation, op and collective logs, captures in stream order, parameters, the RNG and the
// placement policy.
#include "recorder/api/context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "kernels/corpus_kernels.h"
#include "kernels/hash.h"
#include "tests/recorder/api/context_support.h"

namespace cprr {
namespace {

using test::case_failure_of;
using test::make_state;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Holds a stream until released, so ops queued behind it provably run later than the host code
// that issued them (a capture taken at issue time would see different bytes).
struct Gate {
  std::atomic<bool> open{false};
  void hold(Context& ctx, Stream s) {
    std::atomic<bool>* flag = &open;
    ctx.launch(
        s, "gate", 1,
        [flag](uint64_t) {
          while (!flag->load())
            std::this_thread::sleep_for(std::chrono::microseconds(100));  // why: the gate's poll
        },
        Access{});
  }
  void release() { open.store(true); }
};

template <class T>
std::vector<T> filled(std::size_t n, T v) {
  return std::vector<T>(n, v);
}

TEST(Context, AllocAndFreeAreLoggedWithPoolOffsetAndStream) {
  RankState st = make_state();
  Context ctx(st, "unit/alloc", {}, 1, Placement::best_fit);
  const Stream side = ctx.create_stream("side");
  const Buffer a = ctx.alloc("a", 1000);
  const Buffer b = ctx.alloc("b", 64, MemPool::host, side);
  const Buffer c = ctx.alloc("c", 10, MemPool::symmetric);
  EXPECT_EQ(a.pool, MemPool::device);
  EXPECT_EQ(b.pool, MemPool::host);
  EXPECT_EQ(a.bytes, 1000u);
  EXPECT_NE(a.id, b.id);
  EXPECT_NE(b.id, c.id);
  EXPECT_EQ(a.ptr, st.backend->arena_base(MemPool::device));  // first block of the arena
  EXPECT_EQ(b.ptr, st.backend->arena_base(MemPool::host));
  std::memset(a.ptr, 0x5a, a.bytes);  // the memory is real and writable
  ctx.free(a);
  const Buffer d = ctx.alloc("d", 1000);  // best_fit: reuses a's block
  EXPECT_EQ(d.ptr, a.ptr);
  EXPECT_NE(d.id, a.id);
  ctx.drain();
  const CaseCapture cap = ctx.finish();

  ASSERT_EQ(cap.allocs.size(), 8u);  // 4 allocs, 1 free, 3 frees of leftovers by finish()
  for (std::size_t k = 0; k < cap.allocs.size(); ++k) EXPECT_EQ(cap.allocs[k].seq, k);
  const AllocRecord& ra = cap.allocs[0];
  EXPECT_FALSE(ra.is_free);
  EXPECT_EQ(ra.buffer, a.id);
  EXPECT_EQ(ra.name, "a");
  EXPECT_EQ(ra.pool, "device");
  EXPECT_EQ(ra.bytes, 1000u);
  EXPECT_EQ(ra.offset, 0u);
  EXPECT_EQ(ra.stream, 0);
  EXPECT_EQ(cap.allocs[1].name, "b");
  EXPECT_EQ(cap.allocs[1].pool, "host");
  EXPECT_EQ(cap.allocs[1].stream, side.id);
  EXPECT_EQ(cap.allocs[2].pool, "symmetric");
  EXPECT_EQ(cap.allocs[2].bytes, 10u);
  const AllocRecord& fa = cap.allocs[3];
  EXPECT_TRUE(fa.is_free);
  EXPECT_EQ(fa.buffer, a.id);
  EXPECT_EQ(fa.name, "a");
  EXPECT_EQ(fa.bytes, 1000u);
  EXPECT_EQ(fa.offset, 0u);
  EXPECT_EQ(cap.allocs[4].buffer, d.id);
  EXPECT_EQ(cap.allocs[4].offset, 0u);
  // finish() freed b, c and d, and logged each.
  std::vector<uint32_t> freed;
  for (std::size_t k = 5; k < 8; ++k) {
    EXPECT_TRUE(cap.allocs[k].is_free);
    freed.push_back(cap.allocs[k].buffer);
  }
  EXPECT_THAT(freed, ::testing::UnorderedElementsAre(b.id, c.id, d.id));
  for (const auto& engine : st.engines) {
    EXPECT_EQ(engine->live_blocks(), 0u);
    EXPECT_EQ(engine->bytes_in_use(), 0u);
  }
}

TEST(Context, BadFreesAndSlicesAreCaseFailures) {
  RankState st = make_state();
  Context ctx(st, "unit/free", {}, 1, Placement::best_fit);
  const Buffer a = ctx.alloc("a", 512);
  EXPECT_THAT(case_failure_of([&] { a.slice(256, 512); }), HasSubstr("outside buffer"));
  const Buffer s = a.slice(256, 256);
  EXPECT_EQ(s.id, a.id);
  EXPECT_EQ(s.ptr, a.ptr + 256);
  EXPECT_THAT(case_failure_of([&] { ctx.free(s); }), HasSubstr("slice"));
  ctx.free(a);
  EXPECT_THAT(case_failure_of([&] { ctx.free(a); }), HasSubstr("not live"));
  ctx.drain();
  EXPECT_EQ(ctx.finish().allocs.size(), 2u);
}

TEST(Context, OpLogRecordsStreamsAccessesAndEvents) {
  RankState st = make_state();
  Gate gate;
  std::vector<float> y_after;
  CaseCapture cap;
  Buffer x, y;
  Event ev;
  Stream producer, consumer;
  {
    Context ctx(st, "unit/ops", {}, 1, Placement::best_fit);
    producer = ctx.create_stream("producer");
    consumer = ctx.create_stream("consumer");
    x = ctx.alloc("x", 1024 * 4);
    y = ctx.alloc("y", 1024 * 4);
    gate.hold(ctx, producer);
    ctx.launch(producer, "fill", 1024, kernels::FillConst<float>{x.as<float>(), 2.0f},
               Access{{}, {x}});
    ev = ctx.record(producer);
    ctx.wait(consumer, ev);
    ctx.copy(consumer, y, x);
    gate.release();
    ctx.synchronize();
    ctx.host_access("check", Access{{y}, {}});
    y_after.assign(y.as<float>(), y.as<float>() + 1024);
    ctx.drain();
    cap = ctx.finish();
  }
  EXPECT_EQ(producer.id, 1);
  EXPECT_EQ(consumer.id, 2);
  // The copy waited for the fill through the event.
  EXPECT_EQ(y_after, filled<float>(1024, 2.0f));

  std::vector<std::string> kinds;
  for (std::size_t k = 0; k < cap.ops.size(); ++k) {
    EXPECT_EQ(cap.ops[k].seq, k);
    kinds.push_back(cap.ops[k].kind);
  }
  ASSERT_THAT(kinds, ElementsAre("kernel", "kernel", "record", "wait", "copy", "sync", "host"));
  const OpRecord& fill = cap.ops[1];
  EXPECT_EQ(fill.name, "fill");
  EXPECT_EQ(fill.stream, producer.id);
  EXPECT_THAT(fill.reads, IsEmpty());
  EXPECT_THAT(fill.writes, ElementsAre(x.id));
  EXPECT_EQ(fill.event, -1);
  const OpRecord& rec = cap.ops[2];
  EXPECT_EQ(rec.stream, producer.id);
  EXPECT_EQ(rec.event, ev.id);
  EXPECT_GE(ev.id, 0);
  const OpRecord& wait = cap.ops[3];
  EXPECT_EQ(wait.stream, consumer.id);
  EXPECT_EQ(wait.event, ev.id);
  const OpRecord& copy = cap.ops[4];
  EXPECT_EQ(copy.stream, consumer.id);
  EXPECT_THAT(copy.reads, ElementsAre(x.id));
  EXPECT_THAT(copy.writes, ElementsAre(y.id));
  const OpRecord& host = cap.ops[6];
  EXPECT_EQ(host.stream, -1);
  EXPECT_EQ(host.name, "check");
  EXPECT_THAT(host.reads, ElementsAre(y.id));

  // Event ids and stream creation restart with the next case; the streams themselves are reused.
  Context next(st, "unit/ops2", {}, 1, Placement::best_fit);
  EXPECT_EQ(next.create_stream("again").id, 1);
  EXPECT_EQ(next.record(next.stream()).id, ev.id);
  next.drain();
  const CaseCapture cap2 = next.finish();
  ASSERT_EQ(cap2.ops.size(), 1u);
  EXPECT_EQ(cap2.ops[0].seq, 0u);
  EXPECT_EQ(cap2.ops[0].stream, 0);
}

// Each declared access carries which bytes of its allocation it covers: a slice is its parent's
// id plus its span; a copy of fewer bytes than its buffers covers only those.
TEST(Context, ATimelineTimesEveryOpInStreamOrderAndEveryAllocation) {
  RankState st = make_state();
  Gate gate;
  CaseCapture cap;
  constexpr auto kHeld = std::chrono::milliseconds(30);
  {
    Context ctx(st, "unit/timeline", {}, 1, Placement::best_fit, 0, {}, /*timeline=*/true);
    const Stream side = ctx.create_stream("side");
    const Buffer x = ctx.alloc("x", 1024 * 4);
    gate.hold(ctx, side);  // op 0
    ctx.launch(side, "fill", 1024, kernels::FillConst<float>{x.as<float>(), 1.0f},
               Access{{}, {x}});              // op 1
    ctx.host_access("peek", Access{{}, {}});  // op 2
    std::this_thread::sleep_for(kHeld);       // why: the interval the timeline must hold, at least
    gate.release();
    ctx.synchronize();  // op 3
    ctx.drain();
    cap = ctx.finish();
  }
  const Timeline& tl = cap.timeline;
  ASSERT_EQ(tl.ops.size(), cap.ops.size());
  ASSERT_EQ(tl.ops.size(), 4u);
  EXPECT_EQ(tl.allocs.size(), cap.allocs.size()) << "the alloc and the free at finish()";
  for (const OpTime& t : tl.ops) {
    EXPECT_GE(t.begin_ns, tl.start_ns);
    EXPECT_GE(t.end_ns, t.begin_ns);
  }
  const auto held_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(kHeld).count();
  // The gate's end is real: it came after the host released it, kHeld after the host access
  // (its start may lag on a loaded machine, so only the end is pinned).
  EXPECT_GE(tl.ops[0].end_ns - tl.ops[2].begin_ns, held_ns) << "the gate's real end";
  EXPECT_GE(tl.ops[1].begin_ns, tl.ops[0].end_ns) << "the fill ran after the gate on its stream";
  EXPECT_EQ(tl.ops[2].begin_ns, tl.ops[2].end_ns) << "a host access is a point";
  EXPECT_LT(tl.ops[2].begin_ns, tl.ops[0].end_ns) << "the host went on while the gate held";
  EXPECT_GE(tl.ops[3].end_ns, tl.ops[1].end_ns) << "the host's wait ended after the stream's work";
  EXPECT_LE(tl.allocs.front(), tl.ops[0].begin_ns);

  // Without a timeline nothing is timed (recording stays cheap).
  Context plain(st, "unit/plain", {}, 1, Placement::best_fit);
  plain.alloc("y", 64);
  plain.drain();
  EXPECT_TRUE(plain.finish().timeline.empty());
}

TEST(Context, OpLogRecordsTheSpanOfEverySliceAndCopy) {
  RankState st = make_state();
  CaseCapture cap;
  {
    Context ctx(st, "unit/spans", {}, 1, Placement::best_fit);
    const Buffer x = ctx.alloc("x", 256);
    const Buffer y = ctx.alloc("y", 256);
    ctx.host_access("halves", Access{{x.slice(0, 128)}, {x.slice(128, 128), x.slice(136, 8)}});
    ctx.copy(ctx.stream(), y.slice(64, 64), x, 32);
    ctx.drain();
    cap = ctx.finish();
  }
  ASSERT_EQ(cap.ops.size(), 2u);
  const OpRecord& halves = cap.ops[0];
  EXPECT_THAT(halves.read_spans, ElementsAre(ByteSpan{0, 128}));
  EXPECT_THAT(halves.write_spans, ElementsAre(ByteSpan{128, 128}, ByteSpan{136, 8}));
  const OpRecord& copy = cap.ops[1];
  EXPECT_THAT(copy.read_spans, ElementsAre(ByteSpan{0, 32}));
  EXPECT_THAT(copy.write_spans, ElementsAre(ByteSpan{64, 32}));
}

TEST(Context, CopyBoundsAreCaseFailures) {
  RankState st = make_state();
  Context ctx(st, "unit/copy", {}, 1, Placement::best_fit);
  const Buffer small = ctx.alloc("small", 16);
  const Buffer big = ctx.alloc("big", 64);
  EXPECT_THAT(case_failure_of([&] { ctx.copy(ctx.stream(), small, big); }),
              HasSubstr("copy of 64"));
  ctx.copy(ctx.stream(), big, small);  // 16 bytes into 64: fine
  ctx.drain();
  const CaseCapture cap = ctx.finish();
  ASSERT_EQ(cap.ops.size(), 1u);  // the refused copy is not logged
}

TEST(Context, CollectivesAreNumberedFromZeroPerCase) {
  RankState st = make_state();
  CaseCapture cap;
  {
    Context ctx(st, "unit/coll", {}, 1, Placement::best_fit);
    const Buffer buf = ctx.alloc("buf", 256 * 4);
    const Buffer gathered = ctx.alloc("gathered", 256 * 4);
    ctx.all_reduce(ctx.stream(), buf, DType::f32);
    ctx.barrier(ctx.stream());
    ctx.broadcast(ctx.stream(), buf, DType::i64, 0);
    ctx.all_gather(ctx.stream(), buf, gathered, DType::i32);
    EXPECT_THAT(case_failure_of([&] { ctx.broadcast(ctx.stream(), buf, DType::f32, 1); }),
                HasSubstr("root 1"));
    const Buffer odd = ctx.alloc("odd", 6);
    EXPECT_THAT(case_failure_of([&] { ctx.all_reduce(ctx.stream(), odd, DType::f32); }),
                HasSubstr("not a multiple"));
    EXPECT_THAT(case_failure_of([&] {
                  ctx.all_to_all_v(ctx.stream(), buf, {1, 1}, buf, {1}, DType::f32);
                }),
                HasSubstr("all_to_all_v"));
    // A negative count would become a huge unsigned one in the transport.
    EXPECT_THAT(
        case_failure_of([&] { ctx.all_to_all_v(ctx.stream(), buf, {-1}, buf, {1}, DType::f32); }),
        HasSubstr("negative count -1"));
    ctx.drain();
    cap = ctx.finish();
  }
  ASSERT_EQ(cap.collectives.size(), 4u);  // refused calls take no number
  std::vector<std::string> kinds;
  for (std::size_t k = 0; k < cap.collectives.size(); ++k) {
    EXPECT_EQ(cap.collectives[k].seq, k);
    EXPECT_EQ(cap.collectives[k].stream, 0);
    kinds.push_back(cap.collectives[k].kind);
  }
  EXPECT_THAT(kinds, ElementsAre("all_reduce", "barrier", "broadcast", "all_gather"));
  EXPECT_EQ(cap.collectives[0].bytes, 1024u);
  EXPECT_EQ(cap.collectives[0].dtype, DType::f32);
  EXPECT_EQ(cap.collectives[0].root, -1);
  EXPECT_EQ(cap.collectives[1].bytes, 0u);
  EXPECT_EQ(cap.collectives[2].root, 0);
  EXPECT_EQ(cap.collectives[2].dtype, DType::i64);
  int collective_ops = 0;
  for (const OpRecord& op : cap.ops) collective_ops += op.kind == "collective" ? 1 : 0;
  EXPECT_EQ(collective_ops, 4);
  EXPECT_EQ(st.backend->collective_progress().completed_seq, 3);

  // The next case starts again at #0 (the runner also resets the backend's progress).
  st.backend->reset_collective_progress();
  Context next(st, "unit/coll2", {}, 1, Placement::best_fit);
  next.barrier(next.stream());
  next.barrier(next.stream());
  next.drain();
  const CaseCapture cap2 = next.finish();
  ASSERT_EQ(cap2.collectives.size(), 2u);
  EXPECT_EQ(cap2.collectives[0].seq, 0u);
  EXPECT_EQ(cap2.collectives[1].seq, 1u);
}

TEST(Context, CapturesHashTheBufferAtTheirStreamPosition) {
  RankState st = make_state();
  Gate gate;
  CaseCapture cap;
  {
    Context ctx(st, "unit/capture", {}, 1, Placement::best_fit);
    const Stream s = ctx.create_stream("work");
    const Buffer b = ctx.alloc("b", 1024 * 4);
    gate.hold(ctx, s);  // nothing below runs until every op is issued
    ctx.launch(s, "fill1", 1024, kernels::FillConst<float>{b.as<float>(), 1.0f}, Access{{}, {b}});
    ctx.probe("after_fill1", b, DType::f32, s);
    ctx.launch(s, "fill2", 1024, kernels::FillConst<float>{b.as<float>(), 2.0f}, Access{{}, {b}});
    ctx.output("final", b, DType::f32, {32, 32}, s);
    ctx.output("flat", b, DType::f32, {}, s);
    gate.release();
    ctx.drain();
    cap = ctx.finish();
  }
  const auto ones = filled<float>(1024, 1.0f);
  const auto twos = filled<float>(1024, 2.0f);
  ASSERT_EQ(cap.probes.size(), 1u);
  ASSERT_EQ(cap.outputs.size(), 2u);
  const Capture& p = cap.probes[0];
  EXPECT_EQ(p.name, "after_fill1");
  EXPECT_EQ(p.seq, 0u);
  EXPECT_EQ(p.digest, hash_buffer(ones.data(), 4096));
  EXPECT_NE(p.digest, hash_buffer(twos.data(), 4096));
  EXPECT_EQ(p.dtype, DType::f32);
  EXPECT_EQ(p.bytes, 4096u);
  EXPECT_EQ(p.stream, 1);
  EXPECT_THAT(p.shape, ElementsAre(1024));
  ASSERT_EQ(p.raw.size(), 4096u);  // at the raw limit: bytes kept
  EXPECT_EQ(std::memcmp(p.raw.data(), ones.data(), 4096), 0);

  const Capture& o = cap.outputs[0];
  EXPECT_EQ(o.name, "final");
  EXPECT_EQ(o.seq, 0u);
  EXPECT_EQ(o.digest, hash_buffer(twos.data(), 4096));
  EXPECT_THAT(o.shape, ElementsAre(32, 32));
  EXPECT_EQ(cap.outputs[1].seq, 1u);
  EXPECT_EQ(cap.outputs[1].digest, o.digest);
  // Captures are ops too: they read the buffer.
  std::vector<std::string> kinds;
  for (const OpRecord& op : cap.ops) kinds.push_back(op.kind);
  EXPECT_THAT(kinds, ElementsAre("kernel", "kernel", "probe", "kernel", "output", "output"));
  EXPECT_THAT(cap.ops[2].reads, ElementsAre(cap.allocs[0].buffer));
}

TEST(Context, RawBytesAreKeptOnlyForSmallCaptures) {
  RankState st = make_state();
  CaseCapture cap;
  std::vector<uint8_t> big_bytes;
  {
    Context ctx(st, "unit/raw", {}, 1, Placement::best_fit);
    const Buffer small = ctx.alloc("small", 16);
    const Buffer big = ctx.alloc("big", kRawCaptureLimit + 4);
    const Buffer huge = ctx.alloc("huge", 3 * kHashChunkBytes + 8);
    ctx.launch(ctx.stream(), "fill_small", 16, kernels::FillIota<uint8_t>{small.as<uint8_t>(), 7},
               Access{{}, {small}});
    ctx.launch(ctx.stream(), "fill_big", big.bytes,
               kernels::FillIota<uint8_t>{big.as<uint8_t>(), 0}, Access{{}, {big}});
    ctx.output("small", small, DType::u8);
    ctx.output("big", big, DType::u8);
    ctx.output("huge", huge, DType::u8);
    ctx.synchronize();
    big_bytes.assign(big.as<uint8_t>(), big.as<uint8_t>() + big.bytes);
    ctx.drain();
    cap = ctx.finish();
  }
  ASSERT_EQ(cap.outputs.size(), 3u);
  EXPECT_EQ(cap.outputs[0].raw,
            std::string({7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}));
  EXPECT_TRUE(cap.outputs[1].raw.empty());
  EXPECT_EQ(cap.outputs[1].digest, hash_buffer(big_bytes.data(), big_bytes.size()));
  EXPECT_TRUE(cap.outputs[2].raw.empty());
  EXPECT_EQ(cap.outputs[2].digest.chunks.size(), 4u);
}

TEST(Context, ParametersAndTheirErrors) {
  RankState st = make_state();
  const Params params{{"n", "12"}, {"neg", "-5"}, {"bad", "12x"}, {"word", "abc"}, {"empty", ""}};
  Context ctx(st, "unit/params", params, 1, Placement::best_fit);
  EXPECT_EQ(ctx.param("word"), "abc");
  EXPECT_EQ(ctx.param_int("n"), 12);
  EXPECT_EQ(ctx.param_int("neg"), -5);
  EXPECT_EQ(ctx.params(), params);
  EXPECT_EQ(ctx.case_name(), "unit/params");
  EXPECT_THAT(case_failure_of([&] { ctx.param("missing"); }), HasSubstr("'missing'"));
  EXPECT_THAT(case_failure_of([&] { ctx.param("missing"); }), HasSubstr("unit/params"));
  EXPECT_THAT(case_failure_of([&] { ctx.param_int("missing"); }), HasSubstr("'missing'"));
  EXPECT_THAT(case_failure_of([&] { ctx.param_int("bad"); }), HasSubstr("'bad' = '12x'"));
  EXPECT_THAT(case_failure_of([&] { ctx.param_int("word"); }), HasSubstr("'word'"));
  EXPECT_THAT(case_failure_of([&] { ctx.param_int("empty"); }), HasSubstr("'empty'"));
  EXPECT_EQ(case_failure_of([&] { ctx.param_int("n"); }), "no exception");
}

TEST(Context, RngIsReseededFromSeedAndRank) {
  auto draw = [](RankState& st, uint64_t seed) {
    Context ctx(st, "unit/rng", {}, seed, Placement::best_fit);
    EXPECT_EQ(ctx.seed(), seed);
    std::vector<uint64_t> v;
    for (int k = 0; k < 8; ++k) v.push_back(ctx.rng().next());
    return v;
  };
  RankState r0 = make_state(0);
  const auto a = draw(r0, 42);
  EXPECT_EQ(draw(r0, 42), a) << "same seed and rank, next case: same stream";
  EXPECT_NE(draw(r0, 43), a) << "another seed";
  RankState r1 = make_state(1);
  EXPECT_EQ(r1.rank, 1);
  const auto b = draw(r1, 42);
  EXPECT_NE(b, a) << "another rank";
  EXPECT_EQ(draw(r1, 42), b);
  EXPECT_EQ(std::set<uint64_t>(a.begin(), a.end()).size(), a.size());
}

// The shuffled policy draws from the case seed: every rank of one case (same seed, same
// allocations) gets the same layout, and the seed decides it.
TEST(Context, ShuffledPlacementIsSeededByTheCaseSeedOnEveryRank) {
  auto layout = [](int rank, uint64_t seed) {
    RankState st = make_state(rank);
    Context ctx(st, "unit/shuffled", {}, seed, Placement::shuffled);
    std::vector<Buffer> held;
    for (int i = 0; i < 8; ++i) held.push_back(ctx.alloc("b", 4096, MemPool::symmetric));
    for (int i = 0; i < 8; i += 2) ctx.free(held[i]);
    for (int i = 0; i < 4; ++i) ctx.alloc("c", 4096, MemPool::symmetric);
    ctx.drain();
    std::vector<uint64_t> out;
    for (const AllocRecord& a : ctx.finish().allocs) {
      if (!a.is_free && a.name == "c") out.push_back(a.offset);
    }
    EXPECT_EQ(out.size(), 4u);
    return out;
  };
  EXPECT_EQ(layout(0, 5), layout(1, 5));
  std::set<std::vector<uint64_t>> seen;
  for (uint64_t seed = 1; seed <= 8; ++seed) seen.insert(layout(0, seed));
  EXPECT_GT(seen.size(), 1u) << "the seed never changed the layout";
}

TEST(Context, PlacementPolicyAppliesToEveryEngine) {
  RankState st = make_state();
  auto reuse_offsets = [&](Placement p) {
    Context ctx(st, "unit/placement", {}, 1, p);
    for (const auto& engine : st.engines) EXPECT_EQ(engine->policy(), p);
    const Buffer a = ctx.alloc("a", 4096);
    ctx.free(a);
    const Buffer b = ctx.alloc("b", 4096);
    ctx.drain();
    ctx.finish();
    return std::make_pair(a.ptr, b.ptr);
  };
  const auto nr = reuse_offsets(Placement::never_reuse);
  EXPECT_NE(nr.first, nr.second) << "never_reuse handed a freed block out again";
  const auto bf = reuse_offsets(Placement::best_fit);
  EXPECT_EQ(bf.first, bf.second) << "best_fit did not reuse the freed block";
  {
    Context ctx(st, "unit/placement", {}, 1, Placement::counter);
    for (const auto& engine : st.engines) EXPECT_EQ(engine->policy(), Placement::counter);
    ctx.finish();
  }
}

TEST(Context, DrainRethrowsAnOpError) {
  RankState st = make_state();
  Context ctx(st, "unit/drain", {}, 1, Placement::best_fit);
  const Buffer b = ctx.alloc("b", 64);
  ctx.launch(
      ctx.stream(), "boom", 1, [](uint64_t) { throw std::runtime_error("kernel boom"); },
      Access{{}, {b}});
  try {
    ctx.drain();
    ADD_FAILURE() << "drain did not rethrow";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("kernel boom"));
  }
  ctx.drain();  // the error was taken
  const CaseCapture cap = ctx.finish();
  EXPECT_EQ(cap.allocs.size(), 2u);
}

}  // namespace
}  // namespace cprr

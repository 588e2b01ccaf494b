// LibraryMemory (cprr as a library's allocator, the arena side of cprr as torch's CUDA
// allocator) on the CPU backend: served only during cases, placed by the case's policy, memory
// freed on a stream reused only by that stream until the next case, frees reported in order.
#include "recorder/api/library_memory.h"

#include <gtest/gtest.h>

#include <set>

#include "recorder/api/context.h"
#include "recorder/api/library_hooks.h"
#include "tests/recorder/api/context_support.h"

namespace cprr {
namespace {

void* stream_a() { return reinterpret_cast<void*>(0x1000); }
void* stream_b() { return reinterpret_cast<void*>(0x2000); }

// Bytes of the device arena in use: only the library allocates there in these tests.
uint64_t device_in_use(const RankState& state) {
  return state.engines[static_cast<int>(MemPool::device)]->bytes_in_use();
}

Context make_case(RankState& state, Placement placement = Placement::best_fit) {
  return Context(state, "library_memory", {}, 42, placement);
}

TEST(LibraryMemory, ServesOnlyWhileACaseRunsAndFromTheDeviceArena) {
  RankState state = test::make_state();
  std::byte* base = state.backend->arena_base(MemPool::device);
  std::byte* p = nullptr;
  {
    Context ctx = make_case(state);
    LibraryMemory& memory = LibraryHooks(ctx).library_memory();
    p = memory.allocate(1000, stream_a());
    ASSERT_NE(p, nullptr);
    EXPECT_GE(p, base);
    EXPECT_LT(p, base + state.backend->arena_capacity(MemPool::device));
    EXPECT_EQ(device_in_use(state), 1024u);  // the engine's alignment (256)
    ctx.drain();
    ctx.finish();
  }
  // Between cases: not served (the caller allocates elsewhere), and the block outlives its case.
  EXPECT_EQ(state.library->allocate(64, stream_a()), nullptr);
  EXPECT_EQ(device_in_use(state), 1024u);
  // Freed after its case, whenever that is.
  EXPECT_TRUE(state.library->release(p));
  EXPECT_EQ(device_in_use(state), 0u);
  EXPECT_FALSE(state.library->release(p));  // not the arena's any more: the caller's to free
  int on_stack = 0;
  EXPECT_FALSE(state.library->release(reinterpret_cast<std::byte*>(&on_stack)));
}

TEST(LibraryMemory, FreedMemoryServesItsOwnStreamUntilTheNextCase) {
  RankState state = test::make_state();
  std::byte* a = nullptr;
  {
    Context ctx = make_case(state);
    LibraryMemory& memory = LibraryHooks(ctx).library_memory();
    a = memory.allocate(4096, stream_a());
    std::byte* guard = memory.allocate(256, stream_a());
    ASSERT_TRUE(memory.release(a));
    // Another stream's request does not get memory stream A may still be using...
    std::byte* b = memory.allocate(4096, stream_b());
    EXPECT_NE(b, a);
    // ...stream A's does: its own order makes the reuse safe.
    EXPECT_EQ(memory.allocate(4096, stream_a()), a);
    ASSERT_TRUE(memory.release(a));
    ASSERT_TRUE(memory.release(b));
    ASSERT_TRUE(memory.release(guard));
    ctx.drain();
    ctx.finish();
  }
  // The next case starts with the device idle: the block is anyone's.
  Context next = make_case(state);
  EXPECT_EQ(LibraryHooks(next).library_memory().allocate(4096, stream_b()), a);
}

// Memory handed out during a CUDA graph capture is the graph's: each replay uses it again, so
// freed it serves no one, its own stream included, until the next case.
TEST(LibraryMemory, GraphMemoryFreedIsKeptFromEveryoneUntilTheNextCase) {
  RankState state = test::make_state();
  std::byte* g = nullptr;
  {
    Context ctx = make_case(state);
    LibraryHooks hooks(ctx);
    LibraryMemory& memory = hooks.library_memory();
    hooks.begin_graph_capture(1);
    EXPECT_TRUE(memory.capture_open());  // the allocator asks about each request's stream now
    g = memory.allocate(4096, stream_a(), true);
    hooks.end_graph_capture(1);
    EXPECT_FALSE(memory.capture_open());
    std::byte* guard = memory.allocate(256, stream_a());
    ASSERT_TRUE(memory.release(g));
    EXPECT_EQ(memory.take_released(), std::vector<uint64_t>{reinterpret_cast<uint64_t>(g)});
    EXPECT_NE(memory.allocate(4096, stream_a()), g);
    EXPECT_NE(memory.allocate(4096, stream_b()), g);
    ASSERT_TRUE(memory.release(guard));
    ctx.drain();
    ctx.finish();
  }
  Context next = make_case(state);
  EXPECT_EQ(LibraryHooks(next).library_memory().allocate(4096, stream_b()), g);
}

TEST(LibraryMemory, TheCasePlacementPolicyPlacesTheLibrarysMemory) {
  // The same request sequence under best_fit reuses a freed block; under never_reuse it never
  // does: what a replay changes to move a tensor.
  auto second_address = [](Placement placement) {
    RankState state = test::make_state();
    Context ctx = make_case(state, placement);
    LibraryMemory& memory = LibraryHooks(ctx).library_memory();
    std::byte* first = memory.allocate(512, nullptr);
    memory.allocate(512, nullptr);
    memory.release(first);
    std::byte* again = memory.allocate(512, nullptr);
    return again == first;
  };
  EXPECT_TRUE(second_address(Placement::best_fit));
  EXPECT_FALSE(second_address(Placement::never_reuse));
}

TEST(LibraryMemory, ReportsFreesDuringTheCaseInOrderAndForgetsThemAtItsEnd) {
  RankState state = test::make_state();
  Context ctx = make_case(state);
  LibraryMemory& memory = LibraryHooks(ctx).library_memory();
  std::byte* x = memory.allocate(100, stream_a());
  std::byte* y = memory.allocate(100, stream_b());
  std::byte* z = memory.allocate(100, stream_a());
  memory.release(y);
  memory.release(x);
  EXPECT_EQ(memory.take_released(),
            (std::vector<uint64_t>{reinterpret_cast<uint64_t>(y), reinterpret_cast<uint64_t>(x)}));
  EXPECT_TRUE(memory.take_released().empty());
  memory.record_stream(z, stream_b());  // another stream uses it: ordered on the device
  memory.release(z);
  ctx.drain();
  ctx.finish();
  EXPECT_TRUE(state.library->take_released().empty());
}

TEST(LibraryMemory, AFullArenaAnswersNullAndSaysSo) {
  RankState state = test::make_state();
  Context ctx = make_case(state);
  LibraryMemory& memory = LibraryHooks(ctx).library_memory();
  EXPECT_FALSE(memory.full());
  EXPECT_EQ(memory.allocate(state.backend->arena_capacity(MemPool::device) + 1, nullptr), nullptr);
  EXPECT_TRUE(memory.full());
  EXPECT_NE(memory.allocate(64, nullptr), nullptr);
}

TEST(LibraryMemory, ServingEndsWithTheInstance) {
  RankState state = test::make_state();
  {
    Context ctx = make_case(state);
    LibraryHooks(ctx).library_memory().serve();
    EXPECT_EQ(LibraryMemory::serving(), state.library.get());
  }
  state.library.reset();
  EXPECT_EQ(LibraryMemory::serving(), nullptr);
}

}  // namespace
}  // namespace cprr

#include "recorder/api/library_memory.h"

#include <algorithm>
#include <atomic>

#include "recorder/api/context.h"

namespace cprr {
namespace {

// The instance torch's allocator entry points reach (see serving()).
std::atomic<LibraryMemory*> g_serving{nullptr};

// Owner of freed blocks in the placement engine: the stream, never 0 (0 is everyone).
uint64_t owner_of(void* native) { return reinterpret_cast<uint64_t>(native) + 1; }

}  // namespace

LibraryMemory::LibraryMemory(RankState& state) : state_(state) {}

LibraryMemory::~LibraryMemory() {
  LibraryMemory* self = this;
  g_serving.compare_exchange_strong(self, nullptr);
}

LibraryMemory* LibraryMemory::serving() { return g_serving.load(std::memory_order_acquire); }

void LibraryMemory::serve() { g_serving.store(this, std::memory_order_release); }

std::byte* LibraryMemory::allocate(uint64_t bytes, void* native, bool graph) {
  std::lock_guard lock(mu_);
  if (!open_) return nullptr;
  PlacementEngine& engine = *state_.engines[static_cast<int>(MemPool::device)];
  uint64_t offset = 0;
  try {
    offset = engine.allocate(bytes, owner_of(native));
  } catch (const Error&) {
    full_ = true;
    return nullptr;
  }
  std::byte* p = state_.backend->arena_base(MemPool::device) + offset;
  blocks_[p] = Block{offset, native, {}, graph};
  return p;
}

bool LibraryMemory::release(std::byte* p) {
  std::lock_guard lock(mu_);
  const auto it = blocks_.find(p);
  if (it == blocks_.end()) return false;
  const Block& b = it->second;
  // The allocating stream, the block's next user, goes on only after what the streams
  // record_stream named enqueued so far (the caching allocator waits for their events). This
  // runs inside torch's free: nothing may be thrown through it, and a device that cannot order
  // two streams has failed the case on its own.
  try {
    for (void* user : b.users) state_.backend->order_natives(b.stream, user);
  } catch (const std::exception&) {
  }
  if (b.graph) {
    parked_.emplace_back(b.offset, owner_of(b.stream));  // a replay of its graph still uses it
  } else {
    state_.engines[static_cast<int>(MemPool::device)]->release(b.offset, owner_of(b.stream));
  }
  blocks_.erase(it);
  if (open_) released_.push_back(reinterpret_cast<uint64_t>(p));
  return true;
}

void LibraryMemory::record_stream(std::byte* p, void* native) {
  std::lock_guard lock(mu_);
  const auto it = blocks_.find(p);
  if (it == blocks_.end() || it->second.stream == native) return;
  std::vector<void*>& users = it->second.users;
  if (std::find(users.begin(), users.end(), native) == users.end()) users.push_back(native);
}

void LibraryMemory::open_case() {
  std::lock_guard lock(mu_);
  PlacementEngine& engine = *state_.engines[static_cast<int>(MemPool::device)];
  // The graphs of the case before are gone with it (a graph that outlives its case is not
  // modelled): their memory is the engine's again, behind the device sync below.
  for (const auto& [offset, owner] : parked_) engine.release(offset, owner);
  parked_.clear();
  capture_open_ = false;  // a capture the case before left open ended with it
  if (engine.has_owned()) {
    // Between cases nothing orders one stream's freed memory with another's next use but the
    // host waiting for the device.
    state_.backend->synchronize_device();
    engine.share_all();
  }
  open_ = true;
  released_.clear();
}

void LibraryMemory::close_case() {
  std::lock_guard lock(mu_);
  open_ = false;
  released_.clear();
}

std::vector<uint64_t> LibraryMemory::take_released() {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out;
  out.swap(released_);
  return out;
}

bool LibraryMemory::full() const {
  std::lock_guard lock(mu_);
  return full_;
}

}  // namespace cprr

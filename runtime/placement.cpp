#include "runtime/placement.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "runtime/error.h"

namespace cprr {

std::string_view placement_name(Placement p) {
  switch (p) {
    case Placement::best_fit:
      return "best_fit";
    case Placement::counter:
      return "counter";
    case Placement::never_reuse:
      return "never_reuse";
    case Placement::shuffled:
      return "shuffled";
  }
  // Only reachable through a cast from a bad integer (e.g. a corrupt recording).
  CPRR_THROW("unknown placement value {}", static_cast<int>(p));
}

std::optional<Placement> parse_placement(std::string_view s) {
  for (Placement p :
       {Placement::best_fit, Placement::counter, Placement::never_reuse, Placement::shuffled}) {
    if (s == placement_name(p)) return p;
  }
  return std::nullopt;
}

PlacementEngine::PlacementEngine(uint64_t capacity, uint64_t alignment, Placement policy)
    : capacity_(capacity), alignment_(alignment), policy_(policy) {
  // Rounding uses division rather than masks, but a non-power-of-two alignment is never what a
  // device allocator means, so it is refused rather than silently honoured.
  CPRR_CHECK(std::has_single_bit(alignment), "placement alignment {} is not a power of two",
             alignment);
}

namespace {

[[noreturn]] void throw_exhausted(uint64_t bytes, uint64_t alignment, uint64_t capacity,
                                  uint64_t in_use, Placement policy) {
  CPRR_THROW(
      "arena exhausted: request of {} bytes (alignment {}), capacity {}, in use {}, "
      "policy {}",
      bytes, alignment, capacity, in_use, placement_name(policy));
}

// splitmix64's step (runtime/ uses no other cprr folder, so not kernels/rng.h): a fixed
// function of the state, the same on every rank.
uint64_t next_draw(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::optional<uint64_t> PlacementEngine::pick_shuffled(uint64_t size, uint64_t owner) {
  std::vector<uint64_t> fits;
  for (const auto& [offset, block] : free_) {
    if (block.size >= size && (block.owner == 0 || block.owner == owner)) fits.push_back(offset);
  }
  const bool fresh_fits = size <= capacity_ - bump_;
  const uint64_t choices = fits.size() + (fresh_fits ? 1 : 0);
  if (choices == 0) return std::nullopt;  // allocate() reports the exhausted arena
  const uint64_t k = next_draw(shuffle_state_) % choices;
  if (k < fits.size()) return fits[k];
  return std::nullopt;
}

std::optional<uint64_t> PlacementEngine::pick_free(uint64_t size, uint64_t owner) {
  if (policy_ == Placement::never_reuse) return std::nullopt;
  if (policy_ == Placement::shuffled) return pick_shuffled(size, owner);
  std::optional<uint64_t> best;
  const FreeBlock* best_block = nullptr;
  // free_ iterates in address order and only a strictly better block replaces the current pick,
  // so every tie goes to the lowest offset.
  for (const auto& [offset, block] : free_) {
    if (block.size < size || (block.owner != 0 && block.owner != owner)) continue;
    const bool better =
        best_block == nullptr || (policy_ == Placement::best_fit ? block.size < best_block->size
                                                                 : block.stamp < best_block->stamp);
    if (better) {
      best = offset;
      best_block = &block;
    }
  }
  return best;
}

uint64_t PlacementEngine::allocate(uint64_t bytes, uint64_t owner) {
  // Count alignment units instead of adding alignment-1 so huge requests cannot overflow; a
  // 0-byte request still takes one unit so every block has a distinct offset.
  const uint64_t units = bytes == 0 ? 1 : bytes / alignment_ + (bytes % alignment_ != 0);
  if (units > capacity_ / alignment_) {
    throw_exhausted(bytes, alignment_, capacity_, in_use_, policy_);
  }
  const uint64_t size = units * alignment_;

  uint64_t offset = 0;
  if (const std::optional<uint64_t> picked = pick_free(size, owner)) {
    offset = *picked;
    const FreeBlock block = free_.at(offset);
    free_.erase(offset);
    if (block.owner != 0) --owned_;
    // The block keeps the low part; the remainder stays free under its previous owner's stamp.
    if (block.size > size) {
      free_.emplace(offset + size, FreeBlock{block.size - size, block.stamp, block.owner});
      if (block.owner != 0) ++owned_;
    }
  } else {
    // A tail freed under another policy went back to the bump region but is still freed space,
    // so never_reuse carves past everything ever handed out; that gap is leaked like its frees.
    const uint64_t base = policy_ == Placement::never_reuse ? std::max(bump_, high_water_) : bump_;
    if (size > capacity_ - base) throw_exhausted(bytes, alignment_, capacity_, in_use_, policy_);
    offset = base;
    bump_ = base + size;
  }
  live_.emplace(offset, LiveBlock{size, ++counter_});
  in_use_ += size;
  high_water_ = std::max(high_water_, offset + size);
  return offset;
}

void PlacementEngine::release(uint64_t offset, uint64_t owner) {
  const auto it = live_.find(offset);
  CPRR_CHECK(it != live_.end(), "release of offset {} which is not a live block (double free?)",
             offset);
  const FreeBlock block{it->second.size, it->second.stamp, owner};
  live_.erase(it);
  in_use_ -= block.size;
  // never_reuse models an allocator that never hands memory back: the space is simply leaked,
  // even if the policy is switched later.
  if (policy_ == Placement::never_reuse) return;
  add_free(offset, block);
}

void PlacementEngine::add_free(uint64_t start, FreeBlock merged) {
  if (const auto next = free_.find(start + merged.size);
      next != free_.end() && next->second.owner == merged.owner) {
    merged.size += next->second.size;
    merged.stamp = std::min(merged.stamp, next->second.stamp);
    if (next->second.owner != 0) --owned_;
    free_.erase(next);
  }
  if (auto prev = free_.lower_bound(start); prev != free_.begin()) {
    --prev;
    if (prev->first + prev->second.size == start && prev->second.owner == merged.owner) {
      start = prev->first;
      merged.size += prev->second.size;
      merged.stamp = std::min(merged.stamp, prev->second.stamp);
      if (prev->second.owner != 0) --owned_;
      free_.erase(prev);
    }
  }
  // A free block that ends at bump_ is given back to the bump region, so free_ never holds the
  // tail of the carved region. Otherwise a request larger than that tail block but fitting in
  // tail + untouched space would fail although the space is contiguous. An owned block stays
  // its owner's.
  if (merged.owner == 0 && start + merged.size == bump_) {
    bump_ = start;
    return;
  }
  if (merged.owner != 0) ++owned_;
  free_.emplace(start, merged);
}

void PlacementEngine::share_all() {
  if (owned_ == 0) return;
  std::map<uint64_t, FreeBlock> blocks;
  blocks.swap(free_);
  owned_ = 0;
  for (auto& [start, block] : blocks) {
    block.owner = 0;
    add_free(start, block);
  }
}

uint64_t PlacementEngine::block_size(uint64_t offset) const {
  const auto it = live_.find(offset);
  CPRR_CHECK(it != live_.end(), "offset {} is not a live block", offset);
  return it->second.size;
}

}  // namespace cprr

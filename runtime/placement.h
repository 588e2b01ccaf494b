#pragma once
// Placement engine of the tracked allocator: pure offset arithmetic over an arena, no memory.
// Kept separate from the memory so every policy is tested without a backend.
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

namespace cprr {

/// Where a new block goes among the free blocks that fit. Rank-divergent placement is exactly
/// the allocator-order bug class (seed 002), so replay can switch policies.
enum class Placement : uint8_t {
  best_fit,  ///< smallest fitting free block; ties go to the lowest address (caching allocators)
  counter,   ///< fitting free block whose previous owner was allocated earliest (allocation order)
  never_reuse,  ///< bump pointer: freed space is never handed out again
  /// a fitting free block or fresh space, drawn by a generator seeded through set_policy(): the
  /// same seed and the same allocation sequence give the same layout on every rank, while reuse
  /// happens in an order no real allocator would pick
  shuffled,
};

std::string_view placement_name(Placement p);
/// Parses "best_fit" | "counter" | "never_reuse" | "shuffled"; nullopt otherwise.
std::optional<Placement> parse_placement(std::string_view s);

/// Decides offsets of blocks inside an arena of `capacity` bytes. Blocks are aligned to
/// `alignment` (a power of two) and sizes are rounded up to it; a 0-byte request still gets a
/// distinct aligned block. Freed neighbours coalesce (except under never_reuse).
///
/// A block may be released to an `owner` (a stream, as a number other than 0): it then serves
/// only requests of that owner, as a caching allocator hands memory freed on a stream only to
/// that stream, whose order makes the reuse safe, until share_all() makes every freed block
/// anyone's again (the caller has waited for every stream). Owner 0 is everyone.
class PlacementEngine {
 public:
  PlacementEngine(uint64_t capacity, uint64_t alignment, Placement policy);

  /// Returns the offset of a new block of at least `bytes`. Throws cprr::Error naming the request,
  /// the capacity and the bytes in use when no free block fits.
  /// `owner`: the requester; it may take blocks released to it or to everyone.
  uint64_t allocate(uint64_t bytes, uint64_t owner = 0);
  /// Frees the block that starts at `offset`, to `owner` (0: to everyone). Throws cprr::Error for
  /// an offset that is not a live block (double free or wild pointer).
  void release(uint64_t offset, uint64_t owner = 0);
  /// Every freed block is everyone's (and coalesces with its neighbours).
  void share_all();
  /// Whether some freed block still belongs to one owner.
  bool has_owned() const { return owned_ > 0; }

  Placement policy() const { return policy_; }
  /// Changes the policy for later allocations; existing blocks stay where they are. `seed`
  /// restarts the shuffled policy's generator (the other policies ignore it).
  void set_policy(Placement p, uint64_t seed = 0) {
    policy_ = p;
    shuffle_state_ = seed;
  }
  uint64_t capacity() const { return capacity_; }
  uint64_t bytes_in_use() const { return in_use_; }
  /// Highest end offset ever handed out (how much of the arena was touched).
  uint64_t high_water() const { return high_water_; }
  std::size_t live_blocks() const { return live_.size(); }
  /// Size of the live block at `offset` (as rounded); throws for an unknown offset.
  uint64_t block_size(uint64_t offset) const;

 private:
  struct FreeBlock {
    uint64_t size;
    uint64_t stamp;      // allocation counter of the block's most recent owner (counter policy)
    uint64_t owner = 0;  // who may take it (0: everyone)
  };
  struct LiveBlock {
    uint64_t size;
    uint64_t stamp;
  };
  /// The free block a new block of `size` goes to; nullopt: fresh space past the carved region.
  std::optional<uint64_t> pick_free(uint64_t size, uint64_t owner);
  std::optional<uint64_t> pick_shuffled(uint64_t size, uint64_t owner);
  /// Puts [start, start + block.size) back among the free blocks, merged with free neighbours of
  /// the same owner (an everyone's block that ends the carved region returns to the bump region).
  void add_free(uint64_t start, FreeBlock block);

  uint64_t capacity_;
  uint64_t alignment_;
  Placement policy_;
  uint64_t in_use_ = 0;
  uint64_t high_water_ = 0;
  uint64_t bump_ = 0;                   // end of the carved region; space past it is untouched
  uint64_t counter_ = 0;                // allocations so far
  uint64_t shuffle_state_ = 0;          // the shuffled policy's generator
  std::size_t owned_ = 0;               // free blocks with an owner
  std::map<uint64_t, FreeBlock> free_;  // by offset (address order)
  std::map<uint64_t, LiveBlock> live_;  // by offset
};

}  // namespace cprr

#include "runtime/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace cprr {
namespace {

constexpr uint64_t kAlign = 256;

// Returns the message of the cprr::Error thrown by `fn`, or fails the test when none is thrown.
template <class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected cprr::Error";
  return {};
}

TEST(PlacementNames, RoundTripAndRejectUnknown) {
  for (Placement p :
       {Placement::best_fit, Placement::counter, Placement::never_reuse, Placement::shuffled}) {
    EXPECT_EQ(parse_placement(placement_name(p)), p);
  }
  EXPECT_EQ(placement_name(Placement::best_fit), "best_fit");
  EXPECT_EQ(placement_name(Placement::counter), "counter");
  EXPECT_EQ(placement_name(Placement::never_reuse), "never_reuse");
  EXPECT_EQ(placement_name(Placement::shuffled), "shuffled");
  EXPECT_EQ(parse_placement(""), std::nullopt);
  EXPECT_EQ(parse_placement("Best_Fit"), std::nullopt);
  EXPECT_EQ(parse_placement("best_fit "), std::nullopt);
  EXPECT_EQ(parse_placement("lifo"), std::nullopt);
}

TEST(PlacementEngine, RejectsAlignmentThatIsNotAPowerOfTwo) {
  EXPECT_THROW(PlacementEngine(4096, 0, Placement::best_fit), Error);
  EXPECT_THROW(PlacementEngine(4096, 48, Placement::best_fit), Error);
  EXPECT_THROW(PlacementEngine(4096, 3, Placement::counter), Error);
  EXPECT_NO_THROW(PlacementEngine(4096, 1, Placement::best_fit));
  EXPECT_NO_THROW(PlacementEngine(4096, 64, Placement::never_reuse));
}

TEST(PlacementEngine, RoundsSizesUpToAlignmentAndGivesZeroBytesOneUnit) {
  PlacementEngine e(4096, 64, Placement::best_fit);
  EXPECT_EQ(e.allocate(1), 0u);
  EXPECT_EQ(e.block_size(0), 64u);
  EXPECT_EQ(e.allocate(64), 64u);
  EXPECT_EQ(e.block_size(64), 64u);
  EXPECT_EQ(e.allocate(65), 128u);
  EXPECT_EQ(e.block_size(128), 128u);
  const uint64_t zero_a = e.allocate(0);
  const uint64_t zero_b = e.allocate(0);
  EXPECT_EQ(zero_a, 256u);
  EXPECT_EQ(zero_b, 320u);  // distinct blocks even for empty requests
  EXPECT_EQ(e.block_size(zero_a), 64u);
  EXPECT_EQ(e.bytes_in_use(), 64u + 64u + 128u + 64u + 64u);
  EXPECT_EQ(e.high_water(), 384u);
  EXPECT_EQ(e.live_blocks(), 5u);
}

TEST(PlacementEngine, BlockSizeThrowsForUnknownOffset) {
  PlacementEngine e(4096, kAlign, Placement::best_fit);
  const uint64_t a = e.allocate(512);
  EXPECT_THROW(e.block_size(a + kAlign), Error);  // inside a block, not its start
  EXPECT_THROW(e.block_size(2048), Error);
  e.release(a);
  EXPECT_THROW(e.block_size(a), Error);
}

// Four holes fenced by live 256-byte guards, in address order:
//   768 @0 (stamp 1), 256 @1024 (stamp 3), 512 @1536 (stamp 5), 256 @2304 (stamp 7); bump at 2816.
PlacementEngine engine_with_holes(Placement policy) {
  PlacementEngine e(1 << 20, kAlign, policy);
  const uint64_t sizes[4] = {768, 256, 512, 256};
  uint64_t holes[4];
  for (int i = 0; i < 4; ++i) {
    holes[i] = e.allocate(sizes[i]);
    e.allocate(kAlign);  // guard keeps the holes from coalescing
  }
  EXPECT_EQ(holes[0], 0u);
  EXPECT_EQ(holes[1], 1024u);
  EXPECT_EQ(holes[2], 1536u);
  EXPECT_EQ(holes[3], 2304u);
  for (uint64_t h : holes) e.release(h);
  EXPECT_EQ(e.live_blocks(), 4u);
  return e;
}

TEST(PlacementBestFit, PicksSmallestFittingHoleThenLowestAddress) {
  PlacementEngine e = engine_with_holes(Placement::best_fit);
  EXPECT_EQ(e.allocate(200), 1024u);  // two 256 holes tie: the lower one, not the 768 @0
  EXPECT_EQ(e.allocate(256), 2304u);  // the other 256 hole
  EXPECT_EQ(e.allocate(257), 1536u);  // 512 fits exactly; 768 @0 is larger though lower
  EXPECT_EQ(e.allocate(1), 0u);       // only 768 @0 left: split, low part handed out
  EXPECT_EQ(e.allocate(512), 256u);   // the remainder [256, 768) stayed free
  EXPECT_EQ(e.allocate(1), 2816u);    // no hole left: bump region
  EXPECT_EQ(e.high_water(), 3072u);
}

TEST(PlacementCounter, PicksEarliestOwnerRegardlessOfSizeAndSplitKeepsStamp) {
  PlacementEngine e = engine_with_holes(Placement::counter);
  EXPECT_EQ(e.allocate(200), 0u);     // stamp 1 beats the exact-size 256 hole @1024
  EXPECT_EQ(e.allocate(256), 256u);   // remainder of the stamp-1 hole keeps stamp 1
  EXPECT_EQ(e.allocate(256), 512u);   // and again
  EXPECT_EQ(e.allocate(256), 1024u);  // stamp 3
  EXPECT_EQ(e.allocate(512), 1536u);  // stamp 5
  EXPECT_EQ(e.allocate(512), 2816u);  // the 256 hole @2304 is too small: bump
  EXPECT_EQ(e.allocate(1), 2304u);    // stamp 7
}

// Same history under any policy that reuses: P @0 and Q @512 are freed, R reuses @0 and is freed.
// Afterwards hole @0 belongs to R (stamp 5) and hole @512 to Q (stamp 3), both 256 bytes.
void build_reuse_history(PlacementEngine& e) {
  const uint64_t p = e.allocate(256);
  e.allocate(256);  // guard
  const uint64_t q = e.allocate(256);
  e.allocate(256);  // guard
  ASSERT_EQ(p, 0u);
  ASSERT_EQ(q, 512u);
  e.release(q);
  e.release(p);
  const uint64_t r = e.allocate(256);
  ASSERT_EQ(r, 0u);  // both policies: P's hole is lowest and earliest
  e.release(r);
}

TEST(PlacementPolicies, BestFitAndCounterDivergeOnTheSameHistory) {
  PlacementEngine best(4096, kAlign, Placement::best_fit);
  PlacementEngine counter(4096, kAlign, Placement::counter);
  build_reuse_history(best);
  build_reuse_history(counter);
  EXPECT_EQ(best.allocate(256), 0u);       // equal sizes: lowest address
  EXPECT_EQ(counter.allocate(256), 512u);  // Q was allocated before R, though at a higher address
}

// Layout: x [0, 512), guard, y [768, 1024), z [1024, 1280), guard. x and one of y/z are freed and
// reallocated, so that one gets a late stamp; the other keeps its early stamp. Freeing the pair
// (early one first) must produce [768, 1280) with the early stamp, whichever side the freed block
// merges into, so counter prefers it over the 512-byte hole @0 (stamp 6).
void check_coalesced_stamp(bool renew_low_half) {
  PlacementEngine e(1 << 20, kAlign, Placement::counter);
  const uint64_t x = e.allocate(512);  // @0, stamp 1
  e.allocate(256);                     // guard @512, stamp 2
  const uint64_t y = e.allocate(256);  // @768, stamp 3
  const uint64_t z = e.allocate(256);  // @1024, stamp 4
  e.allocate(256);                     // guard @1280, stamp 5
  e.release(x);
  const uint64_t x2 = e.allocate(512);  // reuses @0, stamp 6
  const uint64_t renewed = renew_low_half ? y : z;
  const uint64_t early = renew_low_half ? z : y;
  e.release(renewed);
  ASSERT_EQ(e.allocate(256), renewed);  // reused, stamp 7
  ASSERT_EQ(x2, 0u);
  e.release(x2);       // hole @0, 512 bytes, stamp 6
  e.release(early);    // hole with stamp 3 or 4
  e.release(renewed);  // merges into [768, 1280): min stamp, not the freed block's 7
  EXPECT_EQ(e.allocate(512), 768u) << "renew_low_half=" << renew_low_half;
  EXPECT_EQ(e.allocate(512), 0u);
}

TEST(PlacementCounter, CoalescedBlockTakesMinimumStampOfItsParts) {
  check_coalesced_stamp(false);  // freed block merges with its lower neighbour
  check_coalesced_stamp(true);   // freed block merges with its higher neighbour
}

TEST(PlacementNeverReuse, NeverHandsOutAFreedOffset) {
  PlacementEngine e(2048, kAlign, Placement::never_reuse);
  const uint64_t a = e.allocate(256);
  const uint64_t b = e.allocate(256);
  const uint64_t c = e.allocate(256);
  e.release(b);
  EXPECT_EQ(e.allocate(256), 768u);  // not b's 256
  e.release(768);                    // freeing the tail does not rewind the bump pointer
  EXPECT_EQ(e.allocate(256), 1024u);
  e.release(a);
  e.release(c);
  e.release(1024);
  EXPECT_EQ(e.bytes_in_use(), 0u);
  EXPECT_EQ(e.allocate(256), 1280u);
  EXPECT_EQ(e.allocate(256), 1536u);
  EXPECT_EQ(e.allocate(256), 1792u);
  // Only 768 bytes are in use, but all of the arena has been handed out once.
  const std::string msg = error_message([&] { e.allocate(1); });
  EXPECT_NE(msg.find("request of 1 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in use 768"), std::string::npos) << msg;
}

TEST(PlacementCoalesce, ThreeAdjacentFreedBlocksServeOneRequestAtTheFirstOffset) {
  // Both release orders: neighbours merged one side at a time, and a middle block joining both.
  const uint64_t orders[2][3] = {{1, 0, 2}, {0, 2, 1}};
  for (Placement policy : {Placement::best_fit, Placement::counter}) {
    for (const auto& order : orders) {
      PlacementEngine e(1024, kAlign, policy);
      uint64_t blocks[3];
      for (uint64_t& b : blocks) b = e.allocate(256);
      e.allocate(256);  // guard fills the arena, so only the coalesced hole can serve 768
      for (uint64_t i : order) e.release(blocks[i]);
      EXPECT_EQ(e.allocate(768), 0u) << placement_name(policy);
      EXPECT_EQ(e.block_size(0), 768u);
      EXPECT_EQ(e.bytes_in_use(), 1024u);
    }
  }
}

TEST(PlacementCoalesce, FreedTailReturnsToTheBumpRegion) {
  for (Placement policy : {Placement::best_fit, Placement::counter}) {
    PlacementEngine e(1024, kAlign, policy);
    const uint64_t a = e.allocate(256);
    const uint64_t b = e.allocate(256);
    e.release(b);
    // 768 only fits if [256, 512) rejoined the untouched [512, 1024).
    EXPECT_EQ(e.allocate(768), 256u) << placement_name(policy);
    e.release(256);
    e.release(a);  // a hole @0 merges with the tail: the whole arena is untouched again
    EXPECT_EQ(e.allocate(1024), 0u) << placement_name(policy);
    EXPECT_EQ(e.high_water(), 1024u);
  }
}

TEST(PlacementExhaustion, ThrowsNamingRequestCapacityAndUseAndLeavesStateIntact) {
  for (Placement policy :
       {Placement::best_fit, Placement::counter, Placement::never_reuse, Placement::shuffled}) {
    PlacementEngine e(1 << 20, kAlign, policy);
    ASSERT_EQ(e.allocate(1048064), 0u);
    const std::string msg = error_message([&] { e.allocate(4096); });
    EXPECT_NE(msg.find("arena exhausted"), std::string::npos) << msg;
    EXPECT_NE(msg.find("request of 4096 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("capacity 1048576"), std::string::npos) << msg;
    EXPECT_NE(msg.find("in use 1048064"), std::string::npos) << msg;
    EXPECT_EQ(e.bytes_in_use(), 1048064u);
    EXPECT_EQ(e.live_blocks(), 1u);
    EXPECT_EQ(e.allocate(512), 1048064u);  // the exact remainder still fits
    EXPECT_THROW(e.allocate(0), Error);
  }
}

TEST(PlacementExhaustion, HugeRequestsThrowInsteadOfOverflowing) {
  PlacementEngine e(1 << 20, kAlign, Placement::best_fit);
  EXPECT_THROW(e.allocate(std::numeric_limits<uint64_t>::max()), Error);
  EXPECT_THROW(e.allocate(std::numeric_limits<uint64_t>::max() - kAlign + 2), Error);
  EXPECT_THROW(e.allocate((1 << 20) + 1), Error);
  EXPECT_EQ(e.allocate(1 << 20), 0u);
}

TEST(PlacementExhaustion, FragmentedFreeSpaceDoesNotServeALargerRequest) {
  PlacementEngine e(1024, kAlign, Placement::best_fit);
  const uint64_t a = e.allocate(256);
  e.allocate(256);
  const uint64_t c = e.allocate(256);
  e.allocate(256);
  e.release(a);
  e.release(c);
  EXPECT_EQ(e.bytes_in_use(), 512u);
  const std::string msg = error_message([&] { e.allocate(512); });
  EXPECT_NE(msg.find("request of 512 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in use 512"), std::string::npos) << msg;
}

TEST(PlacementRelease, DoubleFreeAndWildOffsetsThrow) {
  for (Placement policy :
       {Placement::best_fit, Placement::counter, Placement::never_reuse, Placement::shuffled}) {
    PlacementEngine e(4096, kAlign, policy);
    const uint64_t a = e.allocate(512);
    e.allocate(256);
    e.release(a);
    const std::string msg = error_message([&] { e.release(a); });
    EXPECT_NE(msg.find("release of offset 0 which is not a live block"), std::string::npos) << msg;
    EXPECT_THROW(e.release(a + kAlign), Error) << placement_name(policy);  // inside a block
    EXPECT_THROW(e.release(3072), Error) << placement_name(policy);        // never handed out
    EXPECT_EQ(e.bytes_in_use(), 256u);
    EXPECT_EQ(e.live_blocks(), 1u);
  }
}

// The offsets a shuffled engine seeded with `seed` gives a fixed history of allocations and frees
// (twelve 256-byte blocks, every other one freed, then six reallocated).
std::vector<uint64_t> shuffled_offsets(uint64_t seed) {
  PlacementEngine e(1 << 16, kAlign, Placement::best_fit);
  e.set_policy(Placement::shuffled, seed);
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 12; ++i) blocks.push_back(e.allocate(256));
  for (int i = 0; i < 12; i += 2) e.release(blocks[i]);
  std::vector<uint64_t> out;
  for (int i = 0; i < 6; ++i) out.push_back(e.allocate(256));
  EXPECT_EQ(e.live_blocks(), 12u);
  return out;
}

TEST(PlacementOwners, AnOwnedBlockServesOnlyItsOwnerUntilShared) {
  PlacementEngine e(1 << 20, kAlign, Placement::best_fit);
  const uint64_t a = e.allocate(1024, 7);
  const uint64_t guard = e.allocate(256);  // keeps a from being the carved region's tail
  e.release(a, 7);
  EXPECT_TRUE(e.has_owned());
  // Another owner and everyone get fresh space; the owner gets its block back.
  const uint64_t other = e.allocate(1024, 8);
  EXPECT_NE(other, a);
  const uint64_t anyone = e.allocate(1024);
  EXPECT_NE(anyone, a);
  EXPECT_EQ(e.allocate(512, 7), a);
  e.release(a, 7);
  // Shared, the block (and its split remainder, merged back) serves anyone.
  e.share_all();
  EXPECT_FALSE(e.has_owned());
  EXPECT_EQ(e.allocate(1024, 8), a);
  (void)guard;
}

TEST(PlacementOwners, NeighboursOfDifferentOwnersDoNotCoalesce) {
  PlacementEngine e(1 << 20, kAlign, Placement::best_fit);
  const uint64_t a = e.allocate(512);
  const uint64_t b = e.allocate(512);
  const uint64_t guard = e.allocate(256);
  e.release(a, 1);
  e.release(b, 2);
  // 1024 contiguous bytes are free, but of two owners: neither gets both.
  const uint64_t big = e.allocate(1024, 1);
  EXPECT_NE(big, a);
  e.release(big);
  e.share_all();
  EXPECT_EQ(e.allocate(1024, 3), a);
  (void)guard;
}

TEST(PlacementOwners, AnOwnedTailStaysOutOfTheBumpRegionUntilShared) {
  PlacementEngine e(4096, kAlign, Placement::best_fit);
  const uint64_t a = e.allocate(2048);
  e.release(a, 5);
  // The block is the tail, but only owner 5's: everyone else finds 2048 bytes, not 4096.
  EXPECT_THROW(e.allocate(4096), Error);
  e.share_all();
  EXPECT_EQ(e.allocate(4096), 0u);
}

TEST(PlacementPolicies, ShuffledIsAFunctionOfItsSeedAndReusesInAnotherOrder) {
  // Same seed, same history: the same layout (what keeps a correct case's symmetric layout
  // equal on every rank).
  EXPECT_EQ(shuffled_offsets(7), shuffled_offsets(7));
  // Some seed reuses the holes in an order best_fit never would (lowest address first), and
  // some seed picks fresh space over a fitting hole.
  const std::vector<uint64_t> address_order{0, 512, 1024, 1536, 2048, 2560};
  bool reordered = false, fresh = false;
  std::set<std::vector<uint64_t>> layouts;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    const std::vector<uint64_t> got = shuffled_offsets(seed);
    layouts.insert(got);
    reordered = reordered || got != address_order;
    fresh = fresh || std::ranges::any_of(got, [](uint64_t o) { return o >= 12 * 256; });
  }
  EXPECT_TRUE(reordered);
  EXPECT_TRUE(fresh);
  EXPECT_GT(layouts.size(), 8u) << "the seed decides the layout";
}

TEST(PlacementPolicies, SetPolicyAppliesToLaterAllocations) {
  PlacementEngine e(4096, kAlign, Placement::best_fit);
  build_reuse_history(e);  // holes: @0 (owner stamp 5) and @512 (owner stamp 3)
  e.set_policy(Placement::counter);
  EXPECT_EQ(e.policy(), Placement::counter);
  EXPECT_EQ(e.allocate(256), 512u);
  e.set_policy(Placement::never_reuse);
  EXPECT_EQ(e.allocate(256), 1024u);  // hole @0 still free but not reused
  e.set_policy(Placement::best_fit);
  EXPECT_EQ(e.allocate(256), 0u);  // existing free blocks are reusable again
}

TEST(PlacementPolicies, NeverReuseAfterSwitchSkipsATailFreedUnderBestFit) {
  PlacementEngine e(4096, kAlign, Placement::best_fit);
  e.allocate(256);
  const uint64_t b = e.allocate(256);
  e.release(b);  // the tail went back to the bump region
  e.set_policy(Placement::never_reuse);
  EXPECT_EQ(e.allocate(256), 512u);
}

TEST(PlacementPolicies, BlocksFreedUnderNeverReuseStayLeakedAfterSwitch) {
  PlacementEngine e(4096, kAlign, Placement::never_reuse);
  e.allocate(256);
  const uint64_t b = e.allocate(256);
  e.allocate(256);
  e.release(b);
  e.set_policy(Placement::best_fit);
  EXPECT_EQ(e.allocate(256), 768u);  // b's [256, 512) was never made reusable
}

// ---- Randomised stress against an independent model of the live blocks ----

using LiveMap = std::map<uint64_t, uint64_t>;  // offset -> rounded size

struct Gap {
  uint64_t offset;
  uint64_t size;
};

// The holes between live blocks, then the tail [last end, capacity). With full coalescing and
// freed tails returned to the bump region, the holes are exactly the engine's free blocks.
std::vector<Gap> gaps_of(const LiveMap& live, uint64_t capacity) {
  std::vector<Gap> gaps;
  uint64_t end = 0;
  for (const auto& [offset, size] : live) {
    if (offset > end) gaps.push_back({end, offset - end});
    end = offset + size;
  }
  gaps.push_back({end, capacity - end});
  return gaps;
}

std::optional<uint64_t> model_best_fit(const std::vector<Gap>& gaps, uint64_t size) {
  std::optional<Gap> best;
  for (std::size_t i = 0; i + 1 < gaps.size(); ++i) {
    if (gaps[i].size >= size && (!best || gaps[i].size < best->size)) best = gaps[i];
  }
  if (best) return best->offset;
  if (gaps.back().size >= size) return gaps.back().offset;
  return std::nullopt;
}

// Whether some hole (not the tail) fits, and whether anything fits at all.
bool hole_fits(const std::vector<Gap>& gaps, uint64_t size) {
  for (std::size_t i = 0; i + 1 < gaps.size(); ++i) {
    if (gaps[i].size >= size) return true;
  }
  return false;
}

uint64_t round_up(uint64_t bytes) {
  return bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
}

void expect_consistent(const PlacementEngine& e, const LiveMap& live) {
  uint64_t sum = 0;
  for (const auto& [offset, size] : live) {
    sum += size;
    ASSERT_EQ(e.block_size(offset), size);
  }
  ASSERT_EQ(e.bytes_in_use(), sum);
  ASSERT_EQ(e.live_blocks(), live.size());
}

class PlacementStressTest : public ::testing::TestWithParam<Placement> {};

TEST_P(PlacementStressTest, RandomAllocFreeKeepsBlocksDisjointAndInBounds) {
  const Placement policy = GetParam();
  const uint64_t capacity = policy == Placement::never_reuse ? (32u << 20) : (1u << 20);
  PlacementEngine e(capacity, kAlign, policy);
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<uint64_t> small(0, 2048), large(2049, 65536);
  LiveMap live;
  int allocs = 0, exhausted = 0, releases = 0;
  for (int op = 0; op < 10000; ++op) {
    if (!live.empty() && rng() % 100 < 45) {
      auto it = std::next(live.begin(), rng() % live.size());
      e.release(it->first);
      live.erase(it);
      ++releases;
    } else {
      const uint64_t bytes = rng() % 4 == 0 ? large(rng) : small(rng);
      const uint64_t size = round_up(bytes);
      const std::vector<Gap> gaps = gaps_of(live, capacity);
      const uint64_t hw = e.high_water();
      std::optional<uint64_t> expected;
      if (policy == Placement::best_fit) expected = model_best_fit(gaps, size);
      if (policy == Placement::never_reuse && size <= capacity - hw) expected = hw;
      const bool fits = policy == Placement::never_reuse ? expected.has_value()
                                                         : model_best_fit(gaps, size).has_value();
      uint64_t offset = 0;
      try {
        offset = e.allocate(bytes);
      } catch (const Error&) {
        ASSERT_FALSE(fits) << "op " << op << ": threw although " << size << " bytes fit";
        ++exhausted;
        continue;
      }
      ASSERT_TRUE(fits) << "op " << op << ": allocated although nothing fits";
      ++allocs;
      ASSERT_EQ(offset % kAlign, 0u);
      ASSERT_LE(offset + size, capacity);
      ASSERT_EQ(e.block_size(offset), size);
      if (expected) {
        ASSERT_EQ(offset, *expected) << "op " << op;
      }
      if (policy == Placement::counter) {
        // Counter may pick any fitting hole, but must start one, and use a hole before the bump.
        bool at_gap_start = false;
        for (const Gap& g : gaps) at_gap_start |= g.offset == offset && g.size >= size;
        ASSERT_TRUE(at_gap_start) << "op " << op;
        ASSERT_EQ(hole_fits(gaps, size), offset != gaps.back().offset) << "op " << op;
      }
      const auto next = live.lower_bound(offset);
      if (next != live.end()) {
        ASSERT_LE(offset + size, next->first) << "overlaps the next block";
      }
      if (next != live.begin()) {
        const auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, offset) << "overlaps the previous block";
      }
      live.emplace(offset, size);
    }
    ASSERT_NO_FATAL_FAILURE(expect_consistent(e, live));
  }
  // The run must have exercised reuse, frees and exhaustion, or it proves little.
  EXPECT_GT(allocs, 2000);
  EXPECT_GT(releases, 2000);
  EXPECT_GT(exhausted, 0);
  for (const auto& [offset, size] : live) e.release(offset);
  EXPECT_EQ(e.bytes_in_use(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Placement, PlacementStressTest,
                         ::testing::Values(Placement::best_fit, Placement::counter,
                                           Placement::never_reuse),
                         [](const ::testing::TestParamInfo<Placement>& info) {
                           return std::string(placement_name(info.param));
                         });

}  // namespace
}  // namespace cprr

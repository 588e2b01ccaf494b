// check_symmetric_layout and check_collectives on hand-built logs: what every rank must agree on,
// and what may differ freely (other pools' layouts, all-to-all-v sizes).
#include "analysis/layout_check.h"

#include <gtest/gtest.h>

namespace cprr {
namespace {

AllocRecord alloc(uint64_t seq, uint32_t buffer, const char* name, const char* pool,
                  uint64_t offset, uint64_t bytes, bool is_free = false) {
  return AllocRecord{seq, is_free, buffer, name, pool, bytes, offset, 0};
}

CollectiveRecord coll(uint64_t seq, const char* kind, uint64_t bytes, DType dtype = DType::f32,
                      int32_t root = -1) {
  return CollectiveRecord{seq, kind, 0, dtype, bytes, root};
}

TEST(LayoutCheck, SameSymmetricLayoutEverywhereIsFineAndOtherPoolsMayDiffer) {
  CaseCapture r0, r1;
  r0.allocs = {alloc(0, 1, "scratch", "device", 0, 100), alloc(1, 2, "win", "symmetric", 0, 64),
               alloc(2, 2, "win", "symmetric", 0, 64, true),
               alloc(3, 3, "acc", "symmetric", 0, 32)};
  // Rank 1 has a rank-dependent device allocation and frees at other points: only the symmetric
  // allocations' places count.
  r1.allocs = {alloc(0, 1, "scratch", "device", 0, 300), alloc(1, 9, "extra", "device", 512, 8),
               alloc(2, 2, "win", "symmetric", 0, 64), alloc(3, 3, "acc", "symmetric", 0, 32)};
  EXPECT_FALSE(check_symmetric_layout({&r0, &r1, nullptr}).has_value());
}

TEST(LayoutCheck, TheFirstSymmetricAllocationPlacedElsewhereIsReported) {
  CaseCapture r0, r1, r2;
  r0.allocs = {alloc(0, 1, "a", "symmetric", 0, 64), alloc(1, 2, "acc", "symmetric", 64, 32)};
  r1.allocs = r0.allocs;
  r2.allocs = {alloc(0, 1, "a", "symmetric", 0, 64), alloc(1, 2, "acc", "symmetric", 128, 32)};
  const auto m = check_symmetric_layout({&r0, &r1, &r2});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->ordinal, 1u);
  EXPECT_EQ(m->rank_a, 0);
  EXPECT_EQ(m->rank_b, 2);
  EXPECT_EQ(m->a.offset, 64u);
  EXPECT_EQ(m->b.offset, 128u);
  EXPECT_EQ(m->describe(),
            "symmetric allocation #1: rank 0 'acc' at offset 64 (32 bytes), rank 2 'acc' at "
            "offset 128 (32 bytes)");
}

TEST(LayoutCheck, ARankWithFewerSymmetricAllocationsIsReported) {
  CaseCapture r0, r1;
  r0.allocs = {alloc(0, 1, "a", "symmetric", 0, 64)};
  const auto m = check_symmetric_layout({&r0, &r1});
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->present_b);
  EXPECT_NE(m->describe().find("rank 1 has none"), std::string::npos) << m->describe();
}

TEST(CollectiveCheck, TheSameCallsOnEveryRankAreFineAndAllToAllVSizesMayDiffer) {
  CaseCapture r0, r1;
  r0.collectives = {coll(0, "all_reduce", 4096), coll(1, "all_to_all_v", 100),
                    coll(2, "broadcast", 8, DType::u8, 1)};
  r1.collectives = {coll(0, "all_reduce", 4096), coll(1, "all_to_all_v", 300),
                    coll(2, "broadcast", 8, DType::u8, 1)};
  EXPECT_FALSE(check_collectives({&r0, &r1}).has_value());
}

TEST(CollectiveCheck, ADifferentSizeDtypeRootKindOrCountIsReported) {
  CaseCapture r0, r1;
  r0.collectives = {coll(0, "all_reduce", 4096), coll(1, "all_reduce", 64)};
  r1.collectives = {coll(0, "all_reduce", 4096), coll(1, "all_reduce", 32)};
  auto m = check_collectives({&r0, &r1});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->seq, 1u);
  EXPECT_EQ(m->field, "bytes");
  EXPECT_EQ(m->describe(), "collective #1: rank 0 has bytes 64, rank 1 has bytes 32");

  r1.collectives[1] = coll(1, "all_reduce", 64, DType::i32);
  EXPECT_EQ(check_collectives({&r0, &r1})->field, "dtype");
  r1.collectives[1] = coll(1, "broadcast", 64);
  EXPECT_EQ(check_collectives({&r0, &r1})->field, "kind");
  r0.collectives[1] = coll(1, "broadcast", 64, DType::f32, 0);
  r1.collectives[1] = coll(1, "broadcast", 64, DType::f32, 1);
  EXPECT_EQ(check_collectives({&r0, &r1})->field, "root");
  r1.collectives.pop_back();
  m = check_collectives({&r0, &r1});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->field, "count");
  EXPECT_EQ(m->describe(), "rank 0 made 2 collective(s), rank 1 made 1");
}

}  // namespace
}  // namespace cprr

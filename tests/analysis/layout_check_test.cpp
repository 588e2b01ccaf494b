// check_symmetric_layout and check_collectives on hand-built logs: what every rank must agree on,
// and what may differ freely (other pools' layouts, all-to-all-v sizes).
#include "analysis/layout_check.h"

#include <gtest/gtest.h>

#include "rank_reports.h"

namespace cprr {
namespace {

AllocRecord placed(uint64_t seq, uint32_t buffer, const char* name, const char* pool,
                   uint64_t offset, uint64_t bytes, bool is_free = false) {
  return AllocRecord{seq, is_free, buffer, name, pool, bytes, offset, 0};
}

CollectiveRecord coll(uint64_t seq, const char* kind, uint64_t bytes, DType dtype = DType::f32,
                      int32_t root = -1) {
  return CollectiveRecord{seq, kind, 0, dtype, bytes, root};
}

TEST(LayoutCheck, SameSymmetricLayoutEverywhereIsFineAndOtherPoolsMayDiffer) {
  CaseCapture r0, r1;
  r0.allocs = {placed(0, 1, "scratch", "device", 0, 100), placed(1, 2, "win", "symmetric", 0, 64),
               placed(2, 2, "win", "symmetric", 0, 64, true),
               placed(3, 3, "acc", "symmetric", 0, 32)};
  // Rank 1 has a rank-dependent device allocation and frees at other points: only the symmetric
  // allocations' places count.
  r1.allocs = {placed(0, 1, "scratch", "device", 0, 300), placed(1, 9, "extra", "device", 512, 8),
               placed(2, 2, "win", "symmetric", 0, 64), placed(3, 3, "acc", "symmetric", 0, 32)};
  EXPECT_FALSE(check_symmetric_layout({&r0, &r1, nullptr}).has_value());
}

TEST(LayoutCheck, TheFirstSymmetricAllocationPlacedElsewhereIsReported) {
  CaseCapture r0, r1, r2;
  r0.allocs = {placed(0, 1, "a", "symmetric", 0, 64), placed(1, 2, "acc", "symmetric", 64, 32)};
  r1.allocs = r0.allocs;
  r2.allocs = {placed(0, 1, "a", "symmetric", 0, 64), placed(1, 2, "acc", "symmetric", 128, 32)};
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
  r0.allocs = {placed(0, 1, "a", "symmetric", 0, 64)};
  const auto m = check_symmetric_layout({&r0, &r1});
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->present_b);
  EXPECT_NE(m->describe().find("rank 1 has none"), std::string::npos) << m->describe();
}

TEST(LayoutCheck, TorchSymmetricMemoryIsComparedByItsOwnOrdinalsAfterCprrsPool) {
  CaseCapture r0, r1;
  // cprr's window agrees; torch's symmetric memory has one allocation more on rank 1 before the
  // shared one, which is compared by its place among torch's allocations only.
  r0.allocs = {placed(0, 1, "win", "symmetric", 0, 64), placed(1, 2, "x", "torch_symmetric", 0, 32),
               placed(2, 3, "z", "torch_symmetric", 2097152, 32)};
  r1.allocs = {placed(0, 1, "win", "symmetric", 0, 64), placed(1, 2, "x", "torch_symmetric", 0, 32),
               placed(2, 3, "z", "torch_symmetric", 4194304, 32)};
  auto m = check_symmetric_layout({&r0, &r1});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->pool, "torch_symmetric");
  EXPECT_EQ(m->ordinal, 1u);
  EXPECT_EQ(m->describe(),
            "torch symmetric-memory allocation #1: rank 0 'z' at offset 2097152 (32 bytes), rank 1 "
            "'z' at offset 4194304 (32 bytes)");
  r1.allocs[2].offset = 2097152;
  EXPECT_FALSE(check_symmetric_layout({&r0, &r1}).has_value());
  // A cprr-pool mismatch is named first, with its pool.
  r1.allocs[0].offset = 128;
  m = check_symmetric_layout({&r0, &r1});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->pool, "symmetric");
  EXPECT_EQ(m->ordinal, 0u);
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
  EXPECT_EQ(m->describe(), "collective #1 (all_reduce): rank 0 has bytes 64, rank 1 has bytes 32");

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

using Calls = std::vector<CollectiveRecord>;

TEST(BlockedMismatch, EveryRankInTheSameCollectiveCalledDifferentlyIsNamed) {
  const Calls r0{coll(0, "all_reduce", 64), coll(1, "all_reduce", 128)};
  const Calls r1{coll(0, "all_reduce", 64), coll(1, "all_reduce", 96)};
  const Calls r2{coll(0, "all_reduce", 64), coll(1, "all_reduce", 128)};
  const auto m = blocked_mismatch({&r0, &r1, &r2});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->seq, 1u);
  EXPECT_EQ(m->describe(), "collective #1 (all_reduce): rank 0 has bytes 128, rank 1 has bytes 96");
}

TEST(BlockedMismatch, ARankNotYetThereOrAlreadyPastMakesNoDecision) {
  const Calls r0{coll(0, "all_reduce", 64), coll(1, "barrier", 0)};
  const Calls behind{coll(0, "all_reduce", 64)};  // slow: it may still call barrier
  EXPECT_FALSE(blocked_mismatch({&r0, &behind}).has_value());
  const Calls none;  // it has entered nothing yet
  EXPECT_FALSE(blocked_mismatch({&r0, &none}).has_value());
  EXPECT_FALSE(blocked_mismatch({&r0, nullptr}).has_value());
  const Calls ahead{coll(0, "all_reduce", 64), coll(1, "barrier", 0), coll(2, "broadcast", 8)};
  EXPECT_FALSE(blocked_mismatch({&r0, &ahead}).has_value());
  EXPECT_FALSE(blocked_mismatch({&r0}).has_value()) << "one rank waits for no one";
}

TEST(BlockedMismatch, ADifferentDtypeOrReductionAloneCompletesAndIsLeftToThePostMortem) {
  const Calls r0{coll(0, "all_reduce", 64, DType::f32)};
  Calls r1{coll(0, "all_reduce", 64, DType::i32)};
  EXPECT_FALSE(blocked_mismatch({&r0, &r1}).has_value()) << "same size, other dtype: it completes";
  r1 = r0;
  r1[0].op = ReduceOp::max;
  EXPECT_FALSE(blocked_mismatch({&r0, &r1}).has_value()) << "another reduction: it completes";
  r1 = {coll(0, "all_reduce", 32, DType::i32)};  // and a size that differs: that blocks
  const auto m = blocked_mismatch({&r0, &r1});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->field, "bytes");
}

TEST(BlockedMismatch, TheSameCallEverywhereIsNoFindingWhateverCameBefore) {
  // An earlier difference is the post-mortem check's to report; the ranks are not stuck on it.
  const Calls r0{coll(0, "all_reduce", 64), coll(1, "barrier", 0)};
  const Calls r1{coll(0, "all_reduce", 32), coll(1, "barrier", 0)};
  EXPECT_FALSE(blocked_mismatch({&r0, &r1}).has_value());
  const Calls k0{coll(3, "all_to_all_v", 100)}, k1{coll(3, "all_to_all_v", 300)};
  EXPECT_FALSE(blocked_mismatch({&k0, &k1}).has_value()) << "all-to-all-v sizes differ by design";
}

TEST(CollectiveCheck, AllReducesWithDifferentReductionsDiffer) {
  CaseCapture r0, r1;
  r0.collectives = {coll(0, "all_reduce", 64), coll(1, "broadcast", 64, DType::f32, 0)};
  r1.collectives = r0.collectives;
  r1.collectives[0].op = ReduceOp::max;
  const auto m = check_collectives({&r0, &r1});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->field, "op");
  EXPECT_EQ(m->describe(), "collective #0 (all_reduce): rank 0 has op sum, rank 1 has op max");
  // Only an all-reduce reduces: the field means nothing on other kinds.
  r1.collectives[0].op = ReduceOp::sum;
  r1.collectives[1].op = ReduceOp::min;
  EXPECT_FALSE(check_collectives({&r0, &r1}).has_value());
}

// An execution where rank 1 aborted inside collective #1: rank 0 reported (or not), rank 1's
// flight record says what it entered.
ExecutionResult aborted_in_collective(std::vector<CollectiveRecord> rank0,
                                      std::vector<CollectiveRecord> rank1_entered,
                                      bool rank0_reported) {
  ExecutionResult e;
  e.status = ExecStatus::crash;
  RankReport a = rank0_reported ? rank_reports::passed() : rank_reports::silent();
  if (rank0_reported) {
    a.done->capture.collectives = std::move(rank0);
  } else {
    a.entered = std::move(rank0);
  }
  RankReport b = rank_reports::killed_by(6);
  b.entered = std::move(rank1_entered);
  e.ranks = {std::move(a), std::move(b)};
  return e;
}

TEST(CollectiveCheck, FlightRecordsOfRanksWithoutAResultAreCompared) {
  const auto e = aborted_in_collective({coll(0, "all_reduce", 64), coll(1, "all_reduce", 4096)},
                                       {coll(0, "all_reduce", 64), coll(1, "all_reduce", 4000)},
                                       /*rank0_reported=*/false);
  const auto m = check_collectives(e);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->seq, 1u);
  EXPECT_EQ(m->field, "bytes");
  EXPECT_EQ(m->value_a, "4096");
  EXPECT_EQ(m->value_b, "4000");
}

TEST(CollectiveCheck, ALogCutShortByACrashIsNoMismatch) {
  // Rank 1 died after collective #0 (a segfault, not a disagreement): it entered fewer.
  auto e = aborted_in_collective({coll(0, "all_reduce", 64), coll(1, "all_gather", 128)},
                                 {coll(0, "all_reduce", 64)}, /*rank0_reported=*/true);
  EXPECT_FALSE(check_collectives(e).has_value());
  // A rank that died before any collective has an empty flight record: nothing to compare.
  e.ranks[1].entered.clear();
  EXPECT_FALSE(check_collectives(e).has_value());
}

TEST(CollectiveCheck, FlightRecordsAreAlignedBySequenceNumber) {
  // A flight record keeps only the last collectives: rank 1's starts at #5.
  std::vector<CollectiveRecord> full, tail;
  for (uint64_t i = 0; i < 8; ++i) full.push_back(coll(i, "all_reduce", 64));
  for (uint64_t i = 5; i < 8; ++i) tail.push_back(coll(i, "all_reduce", 64));
  auto e = aborted_in_collective(full, tail, /*rank0_reported=*/true);
  EXPECT_FALSE(check_collectives(e).has_value());
  e.ranks[1].entered.back().dtype = DType::f64;
  const auto m = check_collectives(e);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->seq, 7u);
  EXPECT_EQ(m->field, "dtype");
}

TEST(CollectiveCheck, ABodyThatThrewMakesCountsIncomparable) {
  // Rank 1's body failed a check after collective #0 and returned early: a failure, not a
  // collective mismatch.
  ExecutionResult e;
  e.status = ExecStatus::fail;
  RankReport a = rank_reports::passed(), b = rank_reports::failed("acc[0] = 1");
  a.done->capture.collectives = {coll(0, "all_reduce", 64), coll(1, "all_reduce", 64)};
  b.done->capture.collectives = {coll(0, "all_reduce", 64)};
  e.ranks = {a, b};
  EXPECT_FALSE(check_collectives(e).has_value());
  e.status = ExecStatus::pass;
  e.ranks[1] = rank_reports::passed();
  e.ranks[1].done->capture.collectives = {coll(0, "all_reduce", 64)};
  ASSERT_TRUE(check_collectives(e).has_value());
  EXPECT_EQ(check_collectives(e)->field, "count");
}

}  // namespace
}  // namespace cprr

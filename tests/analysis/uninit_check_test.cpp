// check_uninitialized_reads on hand-built logs: reads of bytes nothing wrote through the buffer
// since its allocation, and what must not be reported (a buffer written before it is read, a
// partial write followed by a read of only the written bytes, a window a peer's put filled).
#include "analysis/uninit_check.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace cprr {
namespace {

AllocRecord alloc(uint32_t buffer, const char* name, const char* pool, uint64_t offset,
                  uint64_t bytes) {
  return AllocRecord{buffer, false, buffer, name, pool, bytes, offset, 0};
}

OpRecord op(uint64_t seq, const char* kind, const char* name, std::vector<uint32_t> reads,
            std::vector<uint32_t> writes) {
  return OpRecord{seq, 0, kind, name, std::move(reads), std::move(writes), -1};
}

TEST(UninitCheck, ABufferWrittenBeforeItIsReadIsFine) {
  CaseCapture c;
  c.allocs = {alloc(1, "x", "device", 0, 64), alloc(2, "y", "device", 64, 64)};
  c.ops = {op(0, "kernel", "fill x", {}, {1}), op(1, "kernel", "x to y", {1}, {2}),
           op(2, "output", "y", {2}, {})};
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value());
}

TEST(UninitCheck, AReadOfBytesNothingWroteIsReportedWithTheFirstGap) {
  CaseCapture c;
  c.allocs = {alloc(1, "acc", "device", 128, 64), alloc(2, "g", "device", 0, 64)};
  c.ops = {op(0, "kernel", "fill g", {}, {2}), op(1, "kernel", "acc += g", {2, 1}, {1})};
  const auto u = check_uninitialized_reads({nullptr, &c});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->rank, 1);
  EXPECT_EQ(u->op, 1u);
  EXPECT_EQ(u->buffer_name, "acc");
  EXPECT_EQ(u->begin, 0u);
  EXPECT_EQ(u->end, 64u);
}

TEST(UninitCheck, ARankWithWorkOutsideTheOpLogIsNotChecked) {
  CaseCapture c;
  c.allocs = {alloc(1, "y", "tensor", 0, 64)};
  c.ops = {op(0, "kernel", "read y", {1}, {})};
  ASSERT_TRUE(check_uninitialized_reads({&c}).has_value());
  // A raw copy the dispatcher never saw may have written y.
  c.ops.push_back(op(1, "unseen", "1 outside the op log: 1 async copies and memsets", {}, {}));
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value());
}

TEST(UninitCheck, APartialWriteThenAReadOfOnlyTheWrittenBytesIsFineAndOfMoreIsNot) {
  CaseCapture c;
  c.allocs = {alloc(1, "x", "device", 0, 64)};
  c.ops = {op(0, "kernel", "fill half", {}, {1}), op(1, "kernel", "read half", {1}, {})};
  c.ops[0].write_spans = {{0, 32}};
  c.ops[1].read_spans = {{8, 24}};
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value());
  c.ops[1].read_spans = {{16, 32}};
  const auto u = check_uninitialized_reads({&c});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->begin, 32u);
  EXPECT_EQ(u->end, 48u);
}

TEST(UninitCheck, BytesReusedFromAnEarlierBufferAreUnwrittenForTheNewOne) {
  CaseCapture c;
  // `old` and `fresh` share bytes [0, 64): `old` wrote them, `fresh` never did.
  c.allocs = {alloc(1, "old", "device", 0, 64), AllocRecord{1, true, 1, "old", "device", 64, 0, 0},
              alloc(2, "fresh", "device", 0, 64)};
  c.allocs[2].seq = 2;
  c.ops = {op(0, "kernel", "fill old", {}, {1}), op(1, "kernel", "read fresh", {2}, {})};
  const auto u = check_uninitialized_reads({&c});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->buffer_name, "fresh");
}

TEST(UninitCheck, HostMemoryIsNotCheckedForItIsWrittenByPlainStores) {
  CaseCapture c;
  c.allocs = {alloc(1, "staging", "host", 0, 64), alloc(2, "dev", "device", 0, 64)};
  c.ops = {op(0, "copy", "copy", {1}, {2}), op(1, "output", "dev", {2}, {})};
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value()) << "the host filled it undeclared";
}

TEST(UninitCheck, AWindowAPeerPutIntoCountsAsWritten) {
  CaseCapture r0, r1;
  r0.allocs = r1.allocs = {alloc(1, "win", "symmetric", 0, 64), alloc(2, "src", "device", 0, 64)};
  r0.ops = {op(0, "kernel", "fill src", {}, {2}), op(1, "put", "put", {2}, {1})};
  r0.ops[1].peer = 1;
  r1.ops = {op(0, "kernel", "unpack", {1}, {2})};
  EXPECT_FALSE(check_uninitialized_reads({&r0, &r1}).has_value());
  r0.ops[1].write_spans = {{0, 32}};  // the put fills only half of rank 1's window
  const auto u = check_uninitialized_reads({&r0, &r1});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->rank, 1);
  EXPECT_EQ(u->begin, 32u);
}

}  // namespace
}  // namespace cprr

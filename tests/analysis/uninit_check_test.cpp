// check_uninitialized_reads on hand-built logs: reads of bytes nothing wrote through the buffer
// since its allocation, and what must not be reported (a buffer written before it is read, a
// partial write followed by a read of only the written bytes, a window a peer's put filled);
// copies (OpRecord::moves) carry never-written bytes to the read that uses them, and so do
// collectives that only move bytes (all_gather, broadcast, all_to_all, scatter, gather) from
// rank to rank.
#include "analysis/uninit_check.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace cprr {
namespace {

AllocRecord alloc_at(uint32_t buffer, const char* name, const char* pool, uint64_t offset,
                     uint64_t bytes) {
  return AllocRecord{buffer, false, buffer, name, pool, bytes, offset, 0};
}

OpRecord op(uint64_t seq, const char* kind, const char* name, std::vector<uint32_t> reads,
            std::vector<uint32_t> writes) {
  return OpRecord{seq, 0, kind, name, std::move(reads), std::move(writes), -1};
}

TEST(UninitCheck, ABufferWrittenBeforeItIsReadIsFine) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "x", "device", 0, 64), alloc_at(2, "y", "device", 64, 64)};
  c.ops = {op(0, "kernel", "fill x", {}, {1}), op(1, "kernel", "x to y", {1}, {2}),
           op(2, "output", "y", {2}, {})};
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value());
}

TEST(UninitCheck, AReadOfBytesNothingWroteIsReportedWithTheFirstGap) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "acc", "device", 128, 64), alloc_at(2, "g", "device", 0, 64)};
  c.ops = {op(0, "kernel", "fill g", {}, {2}), op(1, "kernel", "acc += g", {2, 1}, {1})};
  const auto u = check_uninitialized_reads({nullptr, &c});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->rank, 1);
  EXPECT_EQ(u->op, 1u);
  EXPECT_EQ(u->buffer_name, "acc");
  EXPECT_EQ(u->begin, 0u);
  EXPECT_EQ(u->end, 64u);
}

// An opaque call handed a buffer (an access of unknown direction) may have written it: a later
// read of its bytes is no finding; nor is the call a read of never-written bytes itself.
TEST(UninitCheck, BytesAnOpaqueCallWasHandedCountAsWrittenAndItsUseIsNoRead) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "out", "device", 0, 64), alloc_at(2, "y", "device", 64, 64)};
  OpRecord call = op(0, "native", "lib_fill", {}, {});
  call.touches = {1};
  call.touch_spans = {{0, 32}};
  c.ops = {call, op(1, "kernel", "out to y", {1}, {2})};
  const auto u = check_uninitialized_reads({&c});
  ASSERT_TRUE(u.has_value()) << "bytes [32, 64) the call was not handed stay unwritten";
  EXPECT_EQ(u->op, 1u);
  EXPECT_EQ(u->begin, 32u);
  c.ops[0].touch_spans = {{0, 64}};
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value());
}

// A probe replay learned what the call did (OpRecord::probed): it changed [0, 32) and left
// [32, 64) as it was, which a write of the same values does too (zeros into zeroed memory): a
// later read of either is no finding.
TEST(UninitCheck, BytesAProbedCallLeftUnchangedStillCountAsWritten) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "out", "device", 0, 64), alloc_at(2, "y", "device", 64, 64)};
  OpRecord call = op(0, "kernel", "relu", {}, {1});
  call.write_spans = {{0, 32}};
  call.touches = {1};
  call.touch_spans = {{32, 32}};
  call.probed = true;
  c.ops = {call, op(1, "kernel", "out to y", {1}, {2})};
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value());
  c.ops[0].touch_spans = {{32, 16}};
  const auto u = check_uninitialized_reads({&c});
  ASSERT_TRUE(u.has_value()) << "[48, 64) the call was not handed stays unwritten";
  EXPECT_EQ(u->begin, 48u);
}

TEST(UninitCheck, ARankWithWorkOutsideTheOpLogIsNotChecked) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "y", "tensor", 0, 64)};
  c.ops = {op(0, "kernel", "read y", {1}, {})};
  ASSERT_TRUE(check_uninitialized_reads({&c}).has_value());
  // A raw copy the dispatcher never saw may have written y.
  c.ops.push_back(op(1, "unseen", "1 outside the op log: 1 async copies and memsets", {}, {}));
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value());
}

TEST(UninitCheck, APartialWriteThenAReadOfOnlyTheWrittenBytesIsFineAndOfMoreIsNot) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "x", "device", 0, 64)};
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
  c.allocs = {alloc_at(1, "old", "device", 0, 64),
              AllocRecord{1, true, 1, "old", "device", 64, 0, 0},
              alloc_at(2, "fresh", "device", 0, 64)};
  c.allocs[2].seq = 2;
  c.ops = {op(0, "kernel", "fill old", {}, {1}), op(1, "kernel", "read fresh", {2}, {})};
  const auto u = check_uninitialized_reads({&c});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->buffer_name, "fresh");
}

TEST(UninitCheck, HostMemoryIsNotCheckedForItIsWrittenByPlainStores) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "staging", "host", 0, 64), alloc_at(2, "dev", "device", 0, 64)};
  c.ops = {op(0, "copy", "copy", {1}, {2}), op(1, "output", "dev", {2}, {})};
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value()) << "the host filled it undeclared";
}

TEST(UninitCheck, AWindowAPeerPutIntoCountsAsWritten) {
  CaseCapture r0, r1;
  r0.allocs =
      r1.allocs = {alloc_at(1, "win", "symmetric", 0, 64), alloc_at(2, "src", "device", 0, 64)};
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

OpRecord copy(uint64_t seq, const char* name, std::vector<uint32_t> reads,
              std::vector<uint32_t> writes) {
  OpRecord o = op(seq, "kernel", name, std::move(reads), std::move(writes));
  o.moves = true;
  return o;
}

// seed: torch.empty(n).pin_memory() then a full copy_ into the pinned tensor. The copies read
// never-written bytes, and are no finding: the copy_ that overwrites them all leaves nothing.
TEST(UninitCheck, ACopyOfNeverWrittenBytesIsNoReadAndAFullOverwriteCleansThem) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "empty", "tensor", 0, 64), alloc_at(2, "pinned", "tensor", 64, 64),
              alloc_at(3, "src", "tensor", 128, 64)};
  c.ops = {copy(0, "aten._pin_memory", {1}, {2}), op(1, "kernel", "fill src", {}, {3}),
           copy(2, "aten.copy_", {3}, {2}), op(3, "kernel", "aten.sum", {2}, {})};
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value());
}

// An uninitialized buffer copied twice before its use: named at the use, with where it came
// from, latest copy first. The same log without moves names the first copy instead.
TEST(UninitCheck, NeverWrittenBytesCopiedTwiceAreNamedAtTheUseWithTheirCopies) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "torch.empty at x.py:1", "tensor", 0, 64),
              alloc_at(2, "b", "tensor", 64, 64), alloc_at(3, "c", "tensor", 128, 64)};
  c.ops = {copy(0, "aten.clone at x.py:2", {1}, {2}), copy(1, "aten.clone at x.py:3", {2}, {3}),
           op(2, "kernel", "aten.add_ at x.py:4", {3}, {3})};
  const auto u = check_uninitialized_reads({&c});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->op, 2u);
  EXPECT_EQ(u->buffer_name, "c");
  EXPECT_EQ(u->copied,
            "copied by op #1 (kernel 'aten.clone at x.py:3') from 'b', copied by op #0 (kernel "
            "'aten.clone at x.py:2') from 'torch.empty at x.py:1'");
  EXPECT_NE(u->describe().find("reads bytes [0, 64) of 'c' (tensor pool), never-written bytes "
                               "copied by op #1"),
            std::string::npos)
      << u->describe();
  for (OpRecord& o : c.ops) o.moves = false;
  const auto plain = check_uninitialized_reads({&c});
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->op, 0u);
  EXPECT_TRUE(plain->copied.empty());
}

// A cat of a written and a never-written tensor: only the second's bytes land never-written (at
// the cast's scale: f32 into f64 doubles every offset), and a read of the first part is fine.
TEST(UninitCheck, ACopyLandsNeverWrittenBytesAtTheirPlaceScaledToTheWrites) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "a", "tensor", 0, 32), alloc_at(2, "b", "tensor", 32, 32),
              alloc_at(3, "out", "tensor", 64, 128)};
  c.ops = {op(0, "kernel", "fill a", {}, {1}), copy(1, "cat as f64", {1, 2}, {3}),
           op(2, "kernel", "read out's first half", {3}, {})};
  c.ops[2].read_spans = {{0, 64}};
  EXPECT_FALSE(check_uninitialized_reads({&c}).has_value());
  c.ops[2].read_spans = {{0, 72}};
  const auto u = check_uninitialized_reads({&c});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->begin, 64u);
  EXPECT_EQ(u->end, 72u);
  EXPECT_NE(u->copied.find("from 'b'"), std::string::npos) << u->copied;
}

// A copy of never-written bytes over written ones makes them never-written again.
TEST(UninitCheck, ACopyOfNeverWrittenBytesOverWrittenOnesUnwritesThem) {
  CaseCapture c;
  c.allocs = {alloc_at(1, "fresh", "tensor", 0, 64), alloc_at(2, "weights", "tensor", 64, 64)};
  c.ops = {op(0, "kernel", "init weights", {}, {2}), copy(1, "aten.copy_", {1}, {2}),
           op(2, "kernel", "use weights", {2}, {})};
  c.ops[1].write_spans = {{16, 16}};
  c.ops[1].read_spans = {{0, 16}};
  const auto u = check_uninitialized_reads({&c});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->op, 2u);
  EXPECT_EQ(u->begin, 16u);
  EXPECT_EQ(u->end, 32u);
}

// A collective op as the Context logs one: its group in `event`, its number there in `epoch`;
// with its record (root: rank 0) in `c`.
OpRecord collective(CaseCapture& c, uint64_t seq, const char* kind, uint64_t number,
                    std::vector<uint32_t> reads, std::vector<uint32_t> writes) {
  CollectiveRecord record;
  record.kind = kind;
  record.seq = number;
  record.root = std::string(kind) == "broadcast" ? 0 : -1;
  c.collectives.push_back(record);
  OpRecord o = op(seq, "collective", kind, std::move(reads), std::move(writes));
  o.event = 0;
  o.epoch = number;
  return o;
}

// Rank 1 all-gathers a buffer it never wrote: nothing is wrong until a rank reads rank 1's part
// of the result; rank 0's read of it is named with where the bytes came from.
TEST(UninitCheck, AnAllGatherCarriesAPeersNeverWrittenBytesToTheReadThatUsesThem) {
  CaseCapture r0, r1;
  for (CaseCapture* c : {&r0, &r1}) {
    c->allocs = {alloc_at(1, "part", "tensor", 0, 32), alloc_at(2, "all", "tensor", 32, 64)};
  }
  r0.ops = {op(0, "kernel", "fill part", {}, {1}), collective(r0, 1, "all_gather", 0, {1}, {2}),
            op(2, "kernel", "sum all", {2}, {})};
  r0.ops[2].read_spans = {{0, 32}};  // its own part only
  r1.ops = {collective(r1, 0, "all_gather", 0, {1}, {2})};
  EXPECT_FALSE(check_uninitialized_reads({&r0, &r1}).has_value());
  r0.ops[2].read_spans = {{0, 64}};
  const auto u = check_uninitialized_reads({&r0, &r1});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->rank, 0);
  EXPECT_EQ(u->op, 2u);
  EXPECT_EQ(u->begin, 32u);
  EXPECT_EQ(u->end, 64u);
  EXPECT_EQ(u->copied, "sent by rank 1 in op #0 (all_gather #0) from 'part'");
  r1.ops.insert(r1.ops.begin(), op(0, "kernel", "fill part", {}, {1}));
  EXPECT_FALSE(check_uninitialized_reads({&r0, &r1}).has_value());
}

// A broadcast's other ranks receive the root's bytes: a buffer they never wrote is then written
// (broadcast_object_list into torch.empty), unless the root's were never written either. A chain
// of collectives carries them on: rank 0 broadcasts what it gathered from rank 1.
TEST(UninitCheck, ABroadcastCarriesTheRootsBytesAndChainsOfCollectivesAreFollowed) {
  CaseCapture r0, r1;
  for (CaseCapture* c : {&r0, &r1}) {
    c->allocs = {alloc_at(1, "part", "tensor", 0, 32), alloc_at(2, "all", "tensor", 32, 64)};
  }
  r0.ops = {op(0, "kernel", "fill part", {}, {1}), collective(r0, 1, "all_gather", 0, {1}, {2}),
            collective(r0, 2, "broadcast", 1, {2}, {2})};
  r1.ops = {op(0, "kernel", "fill part", {}, {1}), collective(r1, 1, "all_gather", 0, {1}, {2}),
            collective(r1, 2, "broadcast", 1, {}, {2}), op(3, "kernel", "read all", {2}, {})};
  EXPECT_FALSE(check_uninitialized_reads({&r0, &r1}).has_value());
  r1.ops.erase(r1.ops.begin());  // rank 1's part was never written
  const auto u = check_uninitialized_reads({&r0, &r1});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->rank, 1);
  EXPECT_EQ(u->op, 3u);
  EXPECT_EQ(u->begin, 32u);
  EXPECT_EQ(u->end, 64u);
  EXPECT_EQ(u->copied,
            "sent by rank 0 in op #2 (broadcast #1) from 'all', sent by rank 1 in op #1 "
            "(all_gather #0) from 'part'");
}

// Python's calls are logged by name ("dist.all_gather at f.py:3"), each matched with its rank's
// next collective record of that kind; a barrier in between (a record with no op) is skipped.
TEST(UninitCheck, PythonCollectiveCallsAreMatchedWithTheirRecordsInOrder) {
  CaseCapture r0, r1;
  for (CaseCapture* c : {&r0, &r1}) {
    c->allocs = {alloc_at(1, "counts", "tensor", 0, 32), alloc_at(2, "gathered", "tensor", 32, 64)};
    for (const char* kind : {"barrier", "all_gather"}) {
      CollectiveRecord record;
      record.kind = kind;
      record.seq = c->collectives.size();
      c->collectives.push_back(record);
    }
  }
  r0.ops = {op(0, "kernel", "aten.fill_ at f.py:2", {}, {1}),
            op(1, "kernel", "dist.all_gather_into_tensor at f.py:3", {1}, {2}),
            op(2, "kernel", "aten.sum at f.py:4", {2}, {})};
  r1.ops = {op(0, "kernel", "dist.all_gather(async_op=True) at f.py:3", {1}, {2})};
  const auto u = check_uninitialized_reads({&r0, &r1});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->rank, 0);
  EXPECT_EQ(u->begin, 32u);
  EXPECT_EQ(u->copied, "sent by rank 1 in op #0 (all_gather #1) from 'counts'");
}

// Python's scatter: the root's list goes out a chunk per member (rank 0's never-written chunk for
// rank 1 lands in rank 1's tensor, its own chunk was written); gather: every member's tensor
// lands in the root's list in group order, the other ranks receive nothing.
TEST(UninitCheck, AScatterCarriesTheRootsChunkToEachMemberAndAGatherEachPartToTheRoot) {
  CaseCapture r0, r1;
  for (CaseCapture* c : {&r0, &r1}) {
    c->allocs = {alloc_at(1, "scatter_list", "tensor", 0, 64),
                 alloc_at(2, "mine", "tensor", 64, 32),
                 alloc_at(3, "gather_list", "tensor", 96, 64)};
    for (const char* kind : {"scatter", "gather"}) {
      CollectiveRecord record;
      record.kind = kind;
      record.seq = c->collectives.size();
      record.bytes = 32;
      record.root = 0;
      c->collectives.push_back(record);
    }
  }
  r0.ops = {op(0, "kernel", "aten.fill_ at f.py:2", {}, {1}),
            op(1, "kernel", "dist.scatter at f.py:3", {1}, {2}),
            op(2, "kernel", "dist.gather at f.py:4", {2}, {3}),
            op(3, "kernel", "aten.sum at f.py:5", {3}, {})};
  r0.ops[0].write_spans = {{0, 32}};  // the chunk it keeps; rank 1's chunk never written
  r1.ops = {op(0, "kernel", "dist.scatter at f.py:3", {}, {2}),
            op(1, "kernel", "aten.sum at f.py:4", {2}, {})};
  auto u = check_uninitialized_reads({&r0, &r1});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(std::pair(u->rank, u->op), std::pair(1, uint64_t{1}));
  EXPECT_EQ(std::pair(u->begin, u->end), std::pair(uint64_t{0}, uint64_t{32}));
  EXPECT_EQ(u->copied, "sent by rank 0 in op #1 (scatter #0) from 'scatter_list'");
  r0.ops[0].write_spans = {{0, 64}};  // both chunks written: rank 1 reads written bytes
  EXPECT_FALSE(check_uninitialized_reads({&r0, &r1}).has_value());
  r1.ops[1] = op(1, "kernel", "dist.gather at f.py:4", {1}, {});  // sends what it never wrote
  u = check_uninitialized_reads({&r0, &r1});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(std::pair(u->rank, u->op), std::pair(0, uint64_t{3}));
  EXPECT_EQ(std::pair(u->begin, u->end), std::pair(uint64_t{32}, uint64_t{64}));
  EXPECT_EQ(u->copied, "sent by rank 1 in op #1 (gather #1) from 'scatter_list'");
}

// Every buffer's first never-written read is a finding, lowest rank then issue order; a buffer
// read again adds none; the same read on another rank is folded into the first's (one code line
// run by every rank); check_uninitialized_reads is the first of them.
TEST(UninitCheck, EveryBufferReadUnwrittenIsReportedOnceInRankAndIssueOrder) {
  CaseCapture r0, r1;
  for (CaseCapture* c : {&r0, &r1}) {
    c->allocs = {alloc_at(1, "grad", "tensor", 0, 32), alloc_at(2, "stats", "tensor", 32, 32)};
  }
  r0.ops = {op(0, "kernel", "sum grad", {1}, {}), op(1, "kernel", "sum grad again", {1}, {}),
            op(2, "kernel", "read stats", {2}, {})};
  r1.ops = {op(0, "kernel", "fill grad", {}, {1}), op(1, "kernel", "read stats", {2}, {}),
            op(2, "kernel", "read grad's tail", {1}, {})};
  const auto all = uninitialized_reads({&r0, &r1});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(std::pair(all[0].rank, all[0].op), std::pair(0, uint64_t{0}));
  EXPECT_TRUE(all[0].same_on_ranks.empty());
  EXPECT_EQ(std::pair(all[1].rank, all[1].buffer_name), std::pair(0, std::string("stats")));
  EXPECT_EQ(all[1].same_on_ranks, std::vector<int32_t>{1});
  EXPECT_NE(all[1].describe().find("(the same read on rank 1)"), std::string::npos);
  EXPECT_EQ(uninitialized_reads({&r0, &r1}, 1).size(), 1u);
  EXPECT_EQ(check_uninitialized_reads({&r0, &r1})->op_name, "sum grad");
}

// An all-to-all sends each member its chunk: rank 0's never-written chunk for rank 1 lands in
// rank 1's chunk from rank 0; the chunk rank 0 keeps for itself was written.
TEST(UninitCheck, AnAllToAllCarriesEachChunkToItsMember) {
  CaseCapture r0, r1;
  for (CaseCapture* c : {&r0, &r1}) {
    c->allocs = {alloc_at(1, "send", "tensor", 0, 64), alloc_at(2, "recv", "tensor", 64, 64)};
  }
  r0.ops = {op(0, "kernel", "fill first half", {}, {1}),
            collective(r0, 1, "all_to_all_v", 0, {1}, {2}), op(2, "kernel", "read recv", {2}, {})};
  r0.ops[0].write_spans = {{0, 32}};
  r1.ops = {op(0, "kernel", "fill send", {}, {1}), collective(r1, 1, "all_to_all_v", 0, {1}, {2}),
            op(2, "kernel", "read recv", {2}, {})};
  const auto all = uninitialized_reads({&r0, &r1});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].rank, 1);
  EXPECT_EQ(std::pair(all[0].begin, all[0].end), std::pair(uint64_t{0}, uint64_t{32}));
  EXPECT_EQ(all[0].copied, "sent by rank 0 in op #1 (all_to_all_v #0) from 'send'");
}

// A message carries the sender's bytes to the receiver: the Case API's send/recv ops and
// Python's dist.send/dist.recv, each matched with its rank's message record.
TEST(UninitCheck, AMessageCarriesTheSendersNeverWrittenBytes) {
  for (const bool python : {false, true}) {
    SCOPED_TRACE(python ? "python" : "case api");
    CaseCapture r0, r1;
    for (CaseCapture* c : {&r0, &r1}) {
      c->allocs = {alloc_at(1, "buf", "tensor", 0, 32)};
      CollectiveRecord m;
      m.kind = c == &r0 ? "send" : "recv";
      m.peer = c == &r0 ? 1 : 0;
      c->collectives.push_back(m);
    }
    OpRecord send = op(0, "kernel", python ? "dist.send at p.py:4" : "send #0 to 1", {1}, {});
    OpRecord recv = op(0, "kernel", python ? "dist.recv at p.py:6" : "recv #0 from 0", {}, {1});
    if (!python) {
      send.peer = 1, send.event = 0, send.epoch = 0;
      recv.peer = 0, recv.event = 0, recv.epoch = 0;
    }
    r0.ops = {send};
    r1.ops = {recv, op(1, "kernel", "sum buf", {1}, {})};
    const auto u = check_uninitialized_reads({&r0, &r1});
    ASSERT_TRUE(u.has_value());
    EXPECT_EQ(u->rank, 1);
    EXPECT_EQ(u->op, 1u);
    EXPECT_EQ(u->copied, "sent by rank 0 in op #0 (send #0 to rank 1) from 'buf'");
    r0.ops.insert(r0.ops.begin(), op(0, "kernel", "fill buf", {}, {1}));
    EXPECT_FALSE(check_uninitialized_reads({&r0, &r1}).has_value());
  }
}

// torch's batch_isend_irecv is one op reading what it sends and writing what it receives: each
// send and receive is its own message, so rank 0's never-written half of a ring exchange lands
// in rank 1's receive buffer (read: the finding), and rank 1's written send lands in rank 0's.
TEST(UninitCheck, ABatchOfMessagesCarriesEachSendToItsReceiver) {
  CaseCapture r0, r1;
  for (CaseCapture* c : {&r0, &r1}) {
    const int32_t peer = c == &r0 ? 1 : 0;
    c->allocs = {alloc_at(1, "out", "tensor", 0, 32), alloc_at(2, "in", "tensor", 32, 32)};
    for (const char* kind : {"send", "recv"}) {
      CollectiveRecord m;
      m.kind = kind;
      m.peer = peer;
      c->collectives.push_back(m);
    }
    c->ops = {op(0, "kernel", "dist.batch_isend_irecv at b.py:3", {1}, {2}),
              op(1, "kernel", "aten.sum at b.py:4", {2}, {})};
  }
  r1.ops.insert(r1.ops.begin(), op(0, "kernel", "aten.fill_ at b.py:2", {}, {1}));
  const auto u = check_uninitialized_reads({&r0, &r1});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(std::pair(u->rank, u->op_name), std::pair(1, std::string("aten.sum at b.py:4")));
  EXPECT_EQ(u->copied, "sent by rank 0 in op #0 (send #0 to rank 1) from 'out'");
  r0.ops.insert(r0.ops.begin(), op(0, "kernel", "aten.fill_ at b.py:2", {}, {1}));
  EXPECT_FALSE(check_uninitialized_reads({&r0, &r1}).has_value());
}

// A member whose log is not checked (work outside it) still takes its place in the gather: the
// next member's never-written part lands where that member's bytes are, not at the start.
TEST(UninitCheck, AnAllGatherKeepsTheUncheckedMembersPlace) {
  CaseCapture r0, r1, r2;
  for (CaseCapture* c : {&r0, &r1, &r2}) {
    c->allocs = {alloc_at(1, "part", "tensor", 0, 32), alloc_at(2, "all", "tensor", 32, 96)};
  }
  r0.ops = {op(0, "unseen", "1 outside the op log", {}, {}),
            collective(r0, 1, "all_gather", 0, {1}, {2})};
  r0.collectives.back().bytes = 32;
  r1.ops = {op(0, "kernel", "fill part", {}, {1}), collective(r1, 1, "all_gather", 0, {1}, {2})};
  r1.collectives.back().bytes = 32;
  r2.ops = {collective(r2, 0, "all_gather", 0, {1}, {2}), op(1, "kernel", "read all", {2}, {})};
  r2.collectives.back().bytes = 32;
  const auto u = check_uninitialized_reads({&r0, &r1, &r2});
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->rank, 2);
  EXPECT_EQ(std::pair(u->begin, u->end), std::pair(uint64_t{64}, uint64_t{96}));  // its own part
}

}  // namespace
}  // namespace cprr

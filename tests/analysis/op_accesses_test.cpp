// ops_from_log on logs shaped as Context writes them: kinds mapped to ordering roles, buffer ids
// to whole-buffer byte ranges through the allocation log, and the end-to-end check of freed
// bytes reused by another buffer (the record_stream class of bug).
#include "analysis/op_accesses.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace cprr {
namespace {

AllocRecord alloc(uint64_t seq, uint32_t buffer, std::string name, std::string pool,
                  uint64_t offset, uint64_t bytes, bool is_free = false) {
  return AllocRecord{seq, is_free, buffer, std::move(name), std::move(pool), bytes, offset, 0};
}

/// Appends an op the way Context::log_op does: seq is the op's position.
void log(std::vector<OpRecord>& ops, int32_t stream, std::string kind, std::string name,
         std::vector<uint32_t> reads = {}, std::vector<uint32_t> writes = {}, int64_t event = -1) {
  ops.push_back(OpRecord{ops.size(), stream, std::move(kind), std::move(name), std::move(reads),
                         std::move(writes), event});
}

const std::vector<AllocRecord> kAllocs{alloc(0, 1, "x", "device", 128, 64),
                                       alloc(1, 2, "staging", "host", 0, 32)};

TEST(OpAccesses, KindsMapToTheirOrderingRoles) {
  std::vector<OpRecord> ops;
  log(ops, 1, "kernel", "produce", {}, {1});
  log(ops, 1, "record", "record", {}, {}, 3);
  log(ops, 0, "wait", "wait", {}, {}, 3);
  log(ops, 1, "sync", "synchronize stream");
  log(ops, -1, "sync", "synchronize all");
  log(ops, 1, "copy", "read back", {1});
  log(ops, 1, "copy", "copy", {2}, {1});
  log(ops, -1, "host", "fill", {}, {2});
  log(ops, 1, "collective", "all_reduce", {1}, {1});
  log(ops, 0, "probe", "p", {1});
  log(ops, 0, "collective", "barrier");
  const RankOps out = ops_from_log(0, kAllocs, ops);
  ASSERT_EQ(out.size(), ops.size());
  const std::vector<SyncRole> roles{
      SyncRole::none,          SyncRole::record,    SyncRole::wait,      SyncRole::host_join,
      SyncRole::host_join_all, SyncRole::host_join, SyncRole::none,      SyncRole::none,
      SyncRole::collective,    SyncRole::none,      SyncRole::collective};
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].role, roles[i]) << "op #" << i << " " << out[i].kind << " " << out[i].name;
    EXPECT_EQ(out[i].seq, i);
    EXPECT_EQ(out[i].stream, ops[i].stream);
  }
  EXPECT_EQ(out[1].event, 3);
  EXPECT_EQ(out[2].event, 3);
  EXPECT_EQ(out[8].collective_seq, 0u);
  EXPECT_EQ(out[10].collective_seq, 1u);
}

TEST(OpAccesses, BufferIdsBecomeWholeBufferRangesOfTheirPool) {
  std::vector<OpRecord> ops;
  log(ops, 1, "copy", "h2d", {2}, {1});
  const RankOps out = ops_from_log(0, kAllocs, ops);
  ASSERT_EQ(out[0].reads.size(), 1u);
  const ByteRange& src = out[0].reads[0];
  EXPECT_EQ(src.pool, pool_id("host"));
  EXPECT_EQ(src.owner, -1);
  EXPECT_EQ(src.begin, 0u);
  EXPECT_EQ(src.end, 32u);
  EXPECT_EQ(src.buffer_name, "staging");
  const ByteRange& dst = out[0].writes[0];
  EXPECT_EQ(dst.pool, pool_id("device"));
  EXPECT_EQ(dst.begin, 128u);
  EXPECT_EQ(dst.end, 192u);
  EXPECT_EQ(dst.buffer, 1u);
}

TEST(OpAccesses, PoolIdsFollowMemPoolOrder) {
  EXPECT_EQ(pool_id("device"), 0u);
  EXPECT_EQ(pool_id("symmetric"), 1u);
  EXPECT_EQ(pool_id("host"), 2u);
  EXPECT_THROW(pool_id("managed"), Error);
}

TEST(OpAccesses, ContradictoryLogsAreRefused) {
  std::vector<OpRecord> unknown_buffer;
  log(unknown_buffer, 0, "kernel", "k", {9});
  EXPECT_THROW(ops_from_log(0, kAllocs, unknown_buffer), Error);

  std::vector<OpRecord> unknown_kind;
  log(unknown_kind, 0, "teleport", "t");
  EXPECT_THROW(ops_from_log(0, kAllocs, unknown_kind), Error);

  std::vector<AllocRecord> twice = kAllocs;
  twice.push_back(alloc(2, 1, "x again", "device", 0, 64));
  EXPECT_THROW(ops_from_log(0, twice, {}), Error);
}

// Buffer a is read on stream 1, freed on the host, and its bytes handed to b, written on stream 2.
std::vector<AllocRecord> reuse_allocs() {
  return {alloc(0, 1, "a", "device", 0, 64), alloc(1, 1, "a", "device", 0, 64, /*is_free=*/true),
          alloc(2, 2, "b", "device", 0, 64)};
}

TEST(OpAccesses, FreedAfterAStreamWaitAndReusedIsNoRace) {
  std::vector<OpRecord> ops;
  log(ops, 1, "kernel", "consume a", {1});
  log(ops, 1, "record", "record", {}, {}, 0);
  log(ops, 2, "wait", "wait", {}, {}, 0);
  log(ops, 2, "kernel", "fill b", {}, {2});
  const HbResult r = check_happens_before({ops_from_log(0, reuse_allocs(), ops)});
  EXPECT_TRUE(r.races.empty());
}

TEST(OpAccesses, FreedWhileAStreamStillReadsAndReusedIsARaceOnTheBytes) {
  std::vector<OpRecord> ops;
  log(ops, 1, "kernel", "consume a", {1});
  log(ops, 2, "kernel", "fill b", {}, {2});
  const HbResult r = check_happens_before({ops_from_log(0, reuse_allocs(), ops)});
  ASSERT_EQ(r.races.size(), 1u);
  ASSERT_EQ(r.races[0].overlaps.size(), 1u);
  const RaceOverlap& o = r.races[0].overlaps[0];
  EXPECT_EQ(o.first_buffer_name, "a");
  EXPECT_EQ(o.second_buffer_name, "b");
  EXPECT_EQ(o.begin, 0u);
  EXPECT_EQ(o.end, 64u);
  EXPECT_EQ(r.races[0].fix,
            "stream 2 must wait for an event recorded after op #0 (kernel 'consume a') on stream "
            "1, before op #1 (kernel 'fill b')");
}

TEST(OpAccesses, WithoutSpansSlicesAreWholeBuffersSoDisjointSlicesAreReportedConservatively) {
  // A record from before spans: two kernels on disjoint halves of x name only x, so the check
  // must assume both touch all of it.
  std::vector<OpRecord> ops;
  log(ops, 1, "kernel", "left half", {}, {1});
  log(ops, 2, "kernel", "right half", {}, {1});
  EXPECT_EQ(check_happens_before({ops_from_log(0, kAllocs, ops)}).race_count, 1u);
}

TEST(OpAccesses, SpansMakeSlicesTheirOwnBytes) {
  // x is bytes [128, 192) of the device pool; the kernels write its halves, then a third reads
  // bytes 16..48 of it, overlapping only the left half's writer.
  std::vector<OpRecord> ops;
  log(ops, 1, "kernel", "left half", {}, {1});
  ops.back().write_spans = {{0, 32}};
  log(ops, 2, "kernel", "right half", {}, {1});
  ops.back().write_spans = {{32, 32}};
  const RankOps halves = ops_from_log(0, kAllocs, ops);
  EXPECT_EQ(halves[0].writes.at(0).begin, 128u);
  EXPECT_EQ(halves[0].writes.at(0).end, 160u);
  EXPECT_EQ(halves[1].writes.at(0).begin, 160u);
  EXPECT_EQ(check_happens_before({halves}).race_count, 0u) << "disjoint slices do not race";
  log(ops, 2, "kernel", "middle", {1});
  ops.back().read_spans = {{16, 16}};
  const HbResult r = check_happens_before({ops_from_log(0, kAllocs, ops)});
  ASSERT_EQ(r.race_count, 1u);
  EXPECT_EQ(r.races[0].first.name, "left half");
  EXPECT_EQ(r.races[0].second.name, "middle");
  EXPECT_EQ(r.races[0].overlaps.at(0).begin, 144u);
  EXPECT_EQ(r.races[0].overlaps.at(0).end, 160u);
}

TEST(OpAccesses, CapturesOfEveryRankNumberTheirCollectives) {
  CaseCapture rank0, rank1;
  rank0.allocs = rank1.allocs = kAllocs;
  log(rank0.ops, 1, "kernel", "produce", {}, {1});
  log(rank0.ops, 1, "collective", "barrier");
  log(rank0.ops, 2, "collective", "barrier");
  log(rank0.ops, 2, "kernel", "consume", {1});
  log(rank1.ops, 0, "collective", "barrier");
  log(rank1.ops, 0, "collective", "barrier");
  const std::vector<RankOps> ranks = ops_from_captures({&rank0, &rank1, nullptr});
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_TRUE(ranks[2].empty());
  EXPECT_EQ(ranks[0][2].collective_seq, 1u);
  EXPECT_TRUE(check_happens_before(ranks).races.empty());
}

// The one-sided all-to-all-v of seed 003, two calls, each rank writing its peer's window with a
// put and a signal. Rank 1 reads the window after waiting for rank 0's signal of that call.
struct OneSided {
  CaseCapture rank0, rank1;

  OneSided() {
    // win1 and win2: symmetric windows at the same offsets on both ranks; src a device buffer.
    rank0.allocs = rank1.allocs = {alloc(0, 1, "win1", "symmetric", 0, 64),
                                   alloc(1, 2, "win2", "symmetric", 64, 64),
                                   alloc(2, 3, "src", "device", 0, 64)};
  }
  void put_and_signal(uint32_t window, uint64_t epoch) {
    log(rank0.ops, 0, "put", "put", {3}, {window});
    rank0.ops.back().peer = 1;
    log(rank0.ops, 0, "signal", "signal", {}, {}, /*semaphore=*/7);
    rank0.ops.back().peer = 1;
    rank0.ops.back().epoch = epoch;
  }
  void wait(uint64_t epoch) {
    log(rank1.ops, 0, "wait_signal", "wait_signal", {}, {}, /*semaphore=*/7);
    rank1.ops.back().peer = 0;
    rank1.ops.back().epoch = epoch;
  }
  void read(uint32_t window) { log(rank1.ops, 0, "kernel", "unpack", {window}, {3}); }
  HbResult check() const { return check_happens_before(ops_from_captures({&rank0, &rank1})); }
};

TEST(OpAccesses, APutIsAWriteOfThePeersWindowOrderedByTheSignalItWaitsFor) {
  OneSided w;
  w.put_and_signal(1, 1);
  w.wait(1);
  w.read(1);
  w.put_and_signal(2, 2);
  w.wait(2);
  w.read(2);
  const std::vector<RankOps> ranks = ops_from_captures({&w.rank0, &w.rank1});
  EXPECT_EQ(ranks[0][0].writes.at(0).owner, 1) << "the put's bytes are rank 1's";
  EXPECT_EQ(ranks[0][1].semaphore, ranks[1][0].semaphore) << "sender and receiver share the key";
  EXPECT_NE(ranks[0][1].semaphore, semaphore_key(0, 1, 7)) << "the other direction is another one";
  const HbResult r = w.check();
  EXPECT_TRUE(r.races.empty());
  EXPECT_TRUE(r.notes.empty());
}

TEST(OpAccesses, ASkippedWaitLetsTheNextCallReadBeforeThePeersPutLands) {
  OneSided w;
  w.put_and_signal(1, 1);  // rank 1 skips this call's wait (its receive count was 0)
  w.put_and_signal(2, 2);
  w.wait(1);  // returns on call 1's signal
  w.read(2);
  const HbResult r = w.check();
  ASSERT_EQ(r.race_count, 1u);
  const Race& race = r.races[0];
  EXPECT_EQ(race.first.rank, 0);
  EXPECT_EQ(race.first.kind, "put");
  EXPECT_EQ(race.first.seq, 2u);
  EXPECT_EQ(race.second.rank, 1);
  EXPECT_EQ(race.second.name, "unpack");
  EXPECT_EQ(race.overlaps.at(0).memory_rank, 1);
  EXPECT_EQ(race.overlaps.at(0).first_buffer_name, "win2");
}

// A message as Context::message logs it: a stream op naming its peer, group and number.
void log_message(std::vector<OpRecord>& ops, const char* kind, int32_t peer, uint64_t number,
                 std::vector<uint32_t> reads, std::vector<uint32_t> writes, int64_t group = 0) {
  log(ops, 0, "kernel",
      fmt::format("{} #{} {} rank {}", kind, number,
                  std::string_view(kind) == "send" ? "to" : "from", peer),
      std::move(reads), std::move(writes));
  ops.back().peer = peer;
  ops.back().event = group;
  ops.back().epoch = number;
}

TEST(OpAccesses, AMessageOrdersWhatItsSenderDidBeforeAfterItsRecv) {
  // Rank 0 puts into rank 1's window, then sends a message to rank 1 on the same stream; rank 1
  // reads the window once the message arrived: ordered, as a signal would order it.
  OneSided w;
  log(w.rank0.ops, 0, "put", "put", {3}, {1});
  w.rank0.ops.back().peer = 1;
  log_message(w.rank0.ops, "send", 1, 0, {3}, {});
  log_message(w.rank1.ops, "recv", 0, 0, {}, {3});
  w.read(1);
  const std::vector<RankOps> ranks = ops_from_captures({&w.rank0, &w.rank1});
  EXPECT_EQ(ranks[0][1].role, SyncRole::collective);
  EXPECT_EQ(ranks[0][1].sender, 0);
  EXPECT_EQ(ranks[1][0].sender, 0);
  EXPECT_EQ(ranks[1][0].receiver, 1);
  EXPECT_TRUE(w.check().races.empty());
  // The read before the recv, or after a message on another channel, is not ordered.
  OneSided early;
  log(early.rank0.ops, 0, "put", "put", {3}, {1});
  early.rank0.ops.back().peer = 1;
  log_message(early.rank0.ops, "send", 1, 0, {3}, {}, /*group=*/2);
  log_message(early.rank1.ops, "recv", 0, 0, {}, {3}, /*group=*/3);
  early.read(1);
  EXPECT_EQ(early.check().race_count, 1u);
}

TEST(OpAccesses, SemaphoreKeysRefuseWhatTheyCannotNumber) {
  EXPECT_THROW(semaphore_key(kMaxKeyRanks, 0, 0), Error);
  EXPECT_THROW(semaphore_key(0, 0, kMaxKeySemaphores), Error);
  EXPECT_THROW(semaphore_key(0, -1, 0), Error);
}

}  // namespace
}  // namespace cprr

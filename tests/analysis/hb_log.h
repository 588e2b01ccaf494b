#pragma once
// Hand-built op logs for check_happens_before's tests (happens_before_test.cpp and
// happens_before_fix_test.cpp): a rank's ops in issue order, built one call per op.
#include <string>
#include <utility>
#include <vector>

#include "analysis/happens_before.h"

namespace cprr::hb_test {

inline constexpr uint32_t kDevice = 0, kSymmetric = 1, kHost = 2;

inline ByteRange bytes(uint32_t buffer, std::string name, uint64_t begin, uint64_t end,
                uint32_t pool = kDevice, int32_t owner = -1) {
  return ByteRange{pool, owner, begin, end, buffer, std::move(name)};
}

using Ranges = std::vector<ByteRange>;

/// One rank's ops in issue order; each call appends an op and returns its seq.
struct Log {
  RankOps ops;

  uint64_t add(HbOp op) {
    op.seq = ops.size();
    ops.push_back(std::move(op));
    return ops.back().seq;
  }
  uint64_t op(int32_t stream, std::string kind, std::string name, Ranges reads, Ranges writes,
              SyncRole role = SyncRole::none) {
    HbOp op;
    op.stream = stream;
    op.kind = std::move(kind);
    op.name = std::move(name);
    op.reads = std::move(reads);
    op.writes = std::move(writes);
    op.role = role;
    return add(std::move(op));
  }
  /// An opaque call handed `touched`: accesses of unknown direction.
  uint64_t opaque(int32_t stream, std::string name, Ranges touched) {
    HbOp op;
    op.stream = stream;
    op.kind = "native";
    op.name = std::move(name);
    op.touches = std::move(touched);
    return add(std::move(op));
  }
  uint64_t kernel(int32_t stream, std::string name, Ranges reads, Ranges writes) {
    return op(stream, "kernel", std::move(name), std::move(reads), std::move(writes));
  }
  uint64_t copy(int32_t stream, std::string name, Ranges reads, Ranges writes) {
    return op(stream, "copy", std::move(name), std::move(reads), std::move(writes));
  }
  uint64_t host(std::string name, Ranges reads, Ranges writes) {
    return op(-1, "host", std::move(name), std::move(reads), std::move(writes));
  }
  uint64_t event_op(int32_t stream, SyncRole role, int64_t event) {
    HbOp op;
    op.stream = stream;
    op.kind = op.name = role == SyncRole::record ? "record" : "wait";
    op.role = role;
    op.event = event;
    return add(std::move(op));
  }
  uint64_t record(int32_t stream, int64_t event) {
    return event_op(stream, SyncRole::record, event);
  }
  uint64_t wait(int32_t stream, int64_t event) { return event_op(stream, SyncRole::wait, event); }
  /// synchronize(stream), or synchronize() for -1.
  uint64_t sync(int32_t stream) {
    return op(stream, "sync", "synchronize", {}, {},
              stream < 0 ? SyncRole::host_join_all : SyncRole::host_join);
  }
  uint64_t read_back(int32_t stream, ByteRange r) {
    return op(stream, "copy", "read back", {std::move(r)}, {}, SyncRole::host_join);
  }
  uint64_t collective(int32_t stream, std::string kind, uint64_t number, Ranges reads = {},
                      Ranges writes = {}) {
    HbOp op;
    op.stream = stream;
    op.kind = "collective";
    op.name = std::move(kind);
    op.reads = std::move(reads);
    op.writes = std::move(writes);
    op.role = SyncRole::collective;
    op.collective_seq = number;
    return add(std::move(op));
  }
  uint64_t signal_op(int32_t stream, SyncRole role, uint32_t semaphore, uint64_t epoch) {
    HbOp op;
    op.stream = stream;
    op.kind = op.name = role == SyncRole::signal ? "signal" : "wait_signal";
    op.role = role;
    op.semaphore = semaphore;
    op.epoch = epoch;
    return add(std::move(op));
  }
  uint64_t signal(int32_t s, uint32_t sem, uint64_t epoch) {
    return signal_op(s, SyncRole::signal, sem, epoch);
  }
  uint64_t wait_signal(int32_t s, uint32_t sem, uint64_t epoch) {
    return signal_op(s, SyncRole::wait_signal, sem, epoch);
  }
};

inline HbResult check(std::vector<Log> logs) {
  std::vector<RankOps> ranks;
  for (Log& l : logs) ranks.push_back(std::move(l.ops));
  return check_happens_before(ranks);
}

/// "rank:seq" of both ops, to compare a race's pair in one assertion.
inline std::pair<std::string, std::string> pair_of(const Race& r) {
  return {std::to_string(r.first.rank) + ":" + std::to_string(r.first.seq),
          std::to_string(r.second.rank) + ":" + std::to_string(r.second.seq)};
}
using Pair = std::pair<std::string, std::string>;

inline const ByteRange kX = bytes(1, "x", 0, 64);
inline const ByteRange kY = bytes(2, "y", 64, 128);
/// A peer's symmetric window, and rank 0's put into rank 1's copy of it.
inline const ByteRange kWindow = bytes(9, "recv window", 0, 64, kSymmetric);
inline const ByteRange kPutIntoRank1 = bytes(8, "send", 0, 64, kSymmetric, /*owner=*/1);

}  // namespace cprr::hb_test

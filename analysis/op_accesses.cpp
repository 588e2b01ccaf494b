#include "analysis/op_accesses.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <tuple>

#include "runtime/error.h"

namespace cprr {

namespace {

// Pool ids, numbered as MemPool.
// "tensor": memory a case's library allocated (a Python case's torch.empty), its address as the
// offset (LibraryHooks::track_memory); "torch_symmetric": such memory in torch's symmetric memory,
// its place in the rank's symmetric windows as the offset.
constexpr std::array<std::string_view, 5> kPoolNames{"device", "symmetric", "host", "tensor",
                                                     "torch_symmetric"};

using Allocations = std::map<uint32_t, const AllocRecord*>;

Allocations allocations_by_id(const std::vector<AllocRecord>& allocs) {
  Allocations out;
  for (const AllocRecord& a : allocs) {
    if (a.is_free) continue;
    if (!out.emplace(a.buffer, &a).second) {
      CPRR_THROW(
          "allocation log #{} allocates buffer {} ('{}') a second time: the op log cannot "
          "say which allocation an op used",
          a.seq, a.buffer, a.name);
    }
  }
  return out;
}

// The pool bytes an op touches in each buffer of `ids`: the recorded span (a slice's) when the
// log has spans, else the whole buffer. A span reaching past its buffer is clipped to it.
std::vector<ByteRange> ranges_of(const Allocations& allocs, const OpRecord& op,
                                 const std::vector<uint32_t>& ids,
                                 const std::vector<ByteSpan>& spans) {
  std::vector<ByteRange> out;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const uint32_t id = ids[k];
    auto it = allocs.find(id);
    if (it == allocs.end()) {
      CPRR_THROW("op #{} ({} '{}') uses buffer {}, which the allocation log never allocates",
                 op.seq, op.kind, op.name, id);
    }
    const AllocRecord& a = *it->second;
    uint64_t begin = a.offset, end = a.offset + a.bytes;
    if (k < spans.size()) {
      begin = a.offset + std::min(spans[k].offset, a.bytes);
      end = begin + std::min(spans[k].bytes, a.offset + a.bytes - begin);
    }
    out.push_back(ByteRange{pool_id(a.pool), -1, begin, end, a.buffer, a.name});
  }
  return out;
}

SyncRole role_of(const OpRecord& op) {
  if (op.is_message()) return SyncRole::collective;  // of its two ends
  // A "native" op is a user's own work run through Context::native(); a "handle" op says the case
  // took a native handle, an "unseen" op that its library did work the log could not see, a
  // "captured" op one its library captured into a CUDA graph, run at the graph's launches (they
  // touch nothing, and order nothing).
  if (op.kind == "kernel" || op.kind == "probe" || op.kind == "output" || op.kind == "host" ||
      op.kind == "put" || op.kind == "native" || op.kind == "handle" || op.kind == "unseen" ||
      op.kind == "captured") {
    return SyncRole::none;
  }
  if (op.kind == "copy") return op.name == kReadBackOpName ? SyncRole::host_join : SyncRole::none;
  if (op.kind == "sync") return op.stream < 0 ? SyncRole::host_join_all : SyncRole::host_join;
  if (op.kind == "record") return SyncRole::record;
  if (op.kind == "wait") return SyncRole::wait;
  if (op.kind == "collective") return SyncRole::collective;
  if (op.kind == "signal") return SyncRole::signal;
  if (op.kind == "wait_signal") return SyncRole::wait_signal;
  CPRR_THROW("op #{} has kind '{}', which the happens-before check does not know", op.seq, op.kind);
}

}  // namespace

uint32_t pool_id(std::string_view pool_name) {
  for (uint32_t i = 0; i < kPoolNames.size(); ++i) {
    if (kPoolNames[i] == pool_name) return i;
  }
  CPRR_THROW("unknown pool '{}' in the allocation log", pool_name);
}

std::string_view pool_name(uint32_t pool) {
  return pool < kPoolNames.size() ? kPoolNames[pool] : std::string_view("?");
}

uint32_t semaphore_key(int32_t receiver, int32_t sender, int64_t semaphore) {
  if (receiver < 0 || sender < 0 || receiver >= kMaxKeyRanks || sender >= kMaxKeyRanks ||
      semaphore < 0 || semaphore >= kMaxKeySemaphores) {
    CPRR_THROW(
        "semaphore {} between ranks {} and {} is outside what the check numbers ({} ranks, "
        "{} semaphores)",
        semaphore, sender, receiver, kMaxKeyRanks, kMaxKeySemaphores);
  }
  return (static_cast<uint32_t>(receiver) * kMaxKeyRanks + static_cast<uint32_t>(sender)) *
             kMaxKeySemaphores +
         static_cast<uint32_t>(semaphore);
}

RankOps ops_from_log(int32_t rank, const std::vector<AllocRecord>& allocs,
                     const std::vector<OpRecord>& ops) {
  const Allocations by_id = allocations_by_id(allocs);
  RankOps out;
  out.reserve(ops.size());
  uint64_t collectives = 0;
  for (const OpRecord& rec : ops) {
    HbOp op;
    op.seq = rec.seq;
    op.stream = rec.stream;
    op.kind = rec.kind;
    op.name = rec.name;
    op.reads = ranges_of(by_id, rec, rec.reads, rec.read_spans);
    op.writes = ranges_of(by_id, rec, rec.writes, rec.write_spans);
    (rec.probed ? op.unchanged : op.touches) = ranges_of(by_id, rec, rec.touches, rec.touch_spans);
    op.role = role_of(rec);
    op.event = rec.event;
    if (rec.is_message()) {
      // Its channel: this rank and its peer, in the direction of the data.
      op.communicator = static_cast<int32_t>(rec.event);
      std::tie(op.sender, op.receiver) = rec.message_ends(rank);
      op.collective_seq = rec.epoch;
    } else if (op.role == SyncRole::collective) {
      // Its group and its number there; a record from before groups numbered the world's
      // collectives in log order and left the event at -1.
      op.communicator = rec.event >= 0 ? static_cast<int32_t>(rec.event) : 0;
      op.collective_seq = rec.event >= 0 ? rec.epoch : collectives++;
    }
    if (rec.kind == "put") {
      for (ByteRange& w : op.writes) w.owner = rec.peer;  // the bytes are the peer's window
    }
    if (op.role == SyncRole::signal || op.role == SyncRole::wait_signal) {
      const bool sends = op.role == SyncRole::signal;
      op.semaphore = semaphore_key(sends ? rec.peer : rank, sends ? rank : rec.peer, rec.event);
      op.epoch = rec.epoch;
    }
    out.push_back(std::move(op));
  }
  return out;
}

std::vector<RankOps> ops_from_captures(const std::vector<const CaseCapture*>& ranks) {
  std::vector<RankOps> out(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r]) out[r] = ops_from_log(static_cast<int32_t>(r), ranks[r]->allocs, ranks[r]->ops);
  }
  return out;
}

}  // namespace cprr

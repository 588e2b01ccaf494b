#pragma once
// The happens-before checker's input (analysis/happens_before.h) built from today's record
// vocabulary: a rank's allocation log gives each buffer id its pool and bytes, its op log gives
// the ops in issue order. Only what the logs say unambiguously is mapped:
// - An op's touches (buffers it uses in a direction not known) are HbOp::touches.
// - Ranges are the recorded spans (OpRecord::read_spans/write_spans: a slice is its parent's id
//   plus its span), so ops on disjoint slices of one buffer do not race. A record from before
//   spans (schema < 3) has none: its ranges are whole buffers, which is conservative (it can
//   report a race that is not one, never miss one).
// - A buffer id is allocated once per execution (Context numbers them and never reuses one), so
//   an id names one allocation; freed bytes reused by a later buffer are compared by offset.
// - `sync` of stream s is a host join of s, `sync` of -1 a join of every stream; the read-back
//   behind Context::read is the `copy` named "read back", which the host waits for.
// - A collective op names its group (`event`) and its number there (`epoch`); a record from
//   before groups has event -1: the world's, numbered in log order.
// - A `put` writes its peer's memory: its write ranges are owned by the peer. A `signal` to peer
//   p on semaphore s and p's `wait_signal` from this rank on s share one world-wide semaphore key
//   (semaphore_key), with the epochs the log records.
#include <cstdint>
#include <string_view>
#include <vector>

#include "analysis/happens_before.h"
#include "data/capture.h"

namespace cprr {

/// The op name Context::read logs for its stream-ordered copy, after which the host waits for
/// that stream (recorder/api/context.cpp, read_bytes).
inline constexpr std::string_view kReadBackOpName = "read back";

/// The pool id of an allocation log's pool name, numbered as MemPool: device 0, symmetric 1,
/// host 2. Throws cprr::Error for any other name.
uint32_t pool_id(std::string_view pool_name);
/// The inverse of pool_id; "?" for an id it never gives.
std::string_view pool_name(uint32_t pool);

/// Ranks and semaphores the world-wide semaphore key can number.
inline constexpr int32_t kMaxKeyRanks = 1024;
inline constexpr int64_t kMaxKeySemaphores = 1024;

/// The world-wide key of semaphore `semaphore` that `sender` raises in `receiver`'s table.
/// Throws cprr::Error outside kMaxKeyRanks / kMaxKeySemaphores.
uint32_t semaphore_key(int32_t receiver, int32_t sender, int64_t semaphore);

/// Rank `rank`'s checker input from its allocation and op logs. Throws cprr::Error naming the op
/// when the logs contradict each other (an op on a buffer never allocated, an id allocated twice,
/// an op kind the checker does not know).
RankOps ops_from_log(int32_t rank, const std::vector<AllocRecord>& allocs,
                     const std::vector<OpRecord>& ops);

/// Every rank's input (index = rank); a null capture (a rank without a result) has no ops.
std::vector<RankOps> ops_from_captures(const std::vector<const CaseCapture*>& ranks);

}  // namespace cprr

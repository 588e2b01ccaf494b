#pragma once
// The happens-before check of one execution's op logs: which pairs of accesses to the same bytes,
// at least one a write, have no ordering path between them (a stream race). Pure: the input is
// plain data an adapter builds from the op and allocation logs (analysis/op_accesses.h does it
// for today's OpRecord vocabulary), so the checker is tested on hand-built logs.
//
// Model: vector clocks over every rank's host thread and streams. Edges: stream order, host issue
// order (an op is issued after everything the host did before it), event record/wait (a wait
// orders only what preceded the record), host joins (synchronize, read-back), collectives (each
// rank's completion follows every rank's entry) and one-sided signals (a wait_signal follows the
// signal that raised its semaphore to the awaited epoch).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cprr {

/// Bytes an op touches: [begin, end) within one pool's arena, plus the buffer for reports.
struct ByteRange {
  uint32_t pool = 0;  ///< pool id (op_accesses.h numbers them as MemPool: device, symmetric, host)
  /// Whose memory: -1 is the accessing rank's own pool. A rank id names a peer's pool (a one-sided
  /// put into a symmetric window); such ranges are compared with that rank's own accesses.
  int32_t owner = -1;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t buffer = 0;  ///< buffer id, for reports only
  std::string buffer_name;
};

/// How an op orders others, besides its stream position and host issue order.
enum class SyncRole : uint8_t {
  none,           ///< accesses only: kernel, copy, probe, output, host access
  record,         ///< captures its stream's position in `event`
  wait,           ///< its stream waits for the last record of `event` issued before it
  host_join,      ///< the host waits for its stream up to and including it (sync, read-back)
  host_join_all,  ///< the host waits for every stream of its rank (synchronize())
  /// completes after every rank entered (`communicator`, `collective_seq`); a message (a
  /// send or recv of the Case API: `sender` >= 0) after both its ends entered
  collective,
  signal,       ///< raises `semaphore` to `epoch` when it runs
  wait_signal,  ///< runs once `semaphore` reached `epoch`
};

/// One op in its rank's host issue order.
struct HbOp {
  uint64_t seq = 0;    ///< position in the rank's op log (reports name it "op #seq")
  int32_t stream = 0;  ///< -1: the host thread itself
  std::string kind;    ///< the op log's word (kernel, copy, host, ...), for reports
  std::string name;
  std::vector<ByteRange> reads;
  std::vector<ByteRange> writes;
  /// Bytes the op may read or write, or not touch at all: an access of unknown direction (an
  /// opaque call handed their address). A race that rests on one is a candidate (Race).
  std::vector<ByteRange> touches;
  /// Bytes a probe replay saw the op leave unchanged (OpRecord::probed): a read, no access, or a
  /// write of the values they held (no reader can tell). Unordered with a write they make a
  /// candidate, with a read nothing.
  std::vector<ByteRange> unchanged;
  SyncRole role = SyncRole::none;
  int64_t event = -1;           ///< record / wait: the event id (per rank)
  int32_t communicator = 0;     ///< collective: which communicator numbers it
  uint64_t collective_seq = 0;  ///< collective: its number on that communicator (or channel)
  /// A message's channel in its communicator (world ranks); -1: a collective of every member.
  int32_t sender = -1;
  int32_t receiver = -1;
  uint32_t semaphore = 0;  ///< signal / wait_signal: a world-wide semaphore id
  uint64_t epoch = 0;      ///< signal: the value it sets; wait_signal: the value it awaits
};

/// One rank's ops in host issue order; the checker takes one per rank, indexed by rank.
using RankOps = std::vector<HbOp>;

/// An op as a race report names it.
struct RaceOp {
  int32_t rank = 0;
  int32_t stream = 0;
  uint64_t seq = 0;
  std::string kind;
  std::string name;
  /// The op's side of the race is an access of unknown direction (HbOp::touches) or bytes it
  /// may only have read (HbOp::unchanged).
  bool inferred = false;

  /// "rank 0 stream 1 op #5 (kernel 'max_logit')"; the host thread reads "host"; an inferred
  /// side reads "op #5 (native 'lib', direction unknown)".
  std::string describe() const;
};

/// Bytes both ops of a race touch, at least one of them writing (or of unknown direction).
struct RaceOverlap {
  uint32_t pool = 0;
  int32_t memory_rank = 0;  ///< whose memory (the owner of the pool)
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t first_buffer = 0;  ///< as the first op names the bytes
  std::string first_buffer_name;
  uint32_t second_buffer = 0;  ///< as the second op names them (differs after a free and reuse)
  std::string second_buffer_name;
};

/// Two unordered ops touching the same bytes. `first` is the op the natural fix orders first: the
/// earlier issued on one rank; across ranks the writer when only one writes, else the lower rank.
/// An access of unknown direction (HbOp::touches) may be a write: unordered with any access to
/// the same bytes it makes a race *candidate*, which only a replay that shows it confirms.
struct Race {
  RaceOp first;
  RaceOp second;
  /// No overlap has two known directions, one a write: every one rests on an access of unknown
  /// direction (two known reads never race).
  bool candidate = false;
  std::vector<RaceOverlap> overlaps;  ///< sorted by memory rank, pool and begin; never empty
  /// The missing ordering as an instruction, e.g. "stream 2 must wait for an event recorded after
  /// op #5 (kernel 'max_logit') on stream 1, before op #9 (kernel 'maximum')". It orders `second`
  /// after every op of its group (fix_after), not only after `first`.
  std::string fix;
  /// Racing pairs of this check that end at `second` on the buffer `second` names the first
  /// overlap's bytes by, this one among them: the group `fix` covers (analysis/race_fix.h).
  std::size_t group_pairs = 1;
  /// The ops `second` must follow for none of the group to race: on each other stream or rank,
  /// the group's latest op there (stream order covers the earlier ones).
  std::vector<RaceOp> fix_after;
  /// The ordering of the log with exactly those edges added orders every pair of the group.
  bool fix_verified = false;
};

/// Limits of one check.
struct HbOptions {
  std::size_t max_races = 100;  ///< races kept (the first in report order); the count is kept whole
};

/// What the check found.
struct HbResult {
  /// One per op pair, ordered by the pair's lower (rank, seq) op, then the other one's.
  std::vector<Race> races;
  std::size_t race_count = 0;  ///< all racing op pairs, also those past max_races
  /// Log facts that weaken the check, e.g. a wait for an event never recorded, a wait_signal with
  /// no matching signal, or ops whose ordering constraints form a cycle.
  std::vector<std::string> notes;
};

/// Checks every rank's ops (index = rank). Accesses of one rank's pool are compared with each
/// other; a range with an owner is compared with the owner's accesses of that pool. Deterministic.
/// Cost: O(N log N + (N + E) * T) for the clocks (N ops, E edges, T streams and host threads of
/// all ranks), then per pool a sweep over accesses sorted by begin, O(A log A + P) for A accesses
/// and P overlapping pairs: quadratic only when many accesses overlap one another, which is fine
/// for the hundreds of ops a case has.
HbResult check_happens_before(const std::vector<RankOps>& ranks, const HbOptions& options = {});

}  // namespace cprr

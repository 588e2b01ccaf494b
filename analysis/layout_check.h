#pragma once
// Cross-rank checks of one execution's allocation and collective logs: what every rank must agree
// on. The symmetric pools' layouts: NCCL's symmetric kernels read each peer's window at this
// rank's offset of a buffer, so the k-th symmetric allocation must have the same offset and size
// on every rank (seed 002: address-ordered reuse after rank-dependent allocations breaks that).
// Two such pools: cprr's window ("symmetric") and torch's symmetric memory ("torch_symmetric",
// offsets in the rank's windows laid end to end in the order they appeared).
// The collectives: the n-th collective of every rank must be the same call (kind, dtype, size,
// root, reduction); a rank that disagrees gets wrong data, a hang or an abort.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/uninit_check.h"
#include "data/capture.h"
#include "data/execution.h"

namespace cprr {

/// The first symmetric allocation whose place differs between two ranks.
struct LayoutMismatch {
  std::string pool = "symmetric";  ///< symmetric | torch_symmetric
  uint64_t ordinal = 0;            ///< the k-th allocation of the case in `pool` (0-based)
  int32_t rank_a = 0;              ///< the lowest rank with a log: the reference
  int32_t rank_b = 0;
  /// Each side's allocation; `present_b` false when rank b made fewer symmetric allocations
  /// (and `present_a` false when it made more).
  bool present_a = true, present_b = true;
  AllocRecord a, b;

  /// "symmetric allocation #2: rank 0 'acc' at offset 0 (4096 bytes), rank 1 'acc' at offset
  /// 8192 (4096 bytes)"; "torch symmetric-memory allocation #2: ..." for torch's.
  std::string describe() const;
};

/// Checks each symmetric pool's allocations of every rank (index = rank; null: no log) against the
/// lowest rank's, cprr's pool first. Frees and other pools are not compared: their layouts may
/// differ freely.
std::optional<LayoutMismatch> check_symmetric_layout(const std::vector<const CaseCapture*>& ranks);

/// The first collective (or message) two ranks called differently.
struct CollectiveMismatch {
  uint64_t seq = 0;    ///< the collective's number in its group (the message's on its channel)
  int32_t rank_a = 0;  ///< a message's sender
  int32_t rank_b = 0;  ///< a message's receiver
  /// kind | dtype | bytes | root | op | count (a rank made fewer collectives, or messages) |
  /// split (an uneven all-to-all: what rank a sends to rank b, and what b expects from a)
  std::string field;
  std::string value_a, value_b;
  std::string kind;  ///< rank a's call ("all_reduce"); empty for a count mismatch
  uint32_t group = 0;            ///< its group (0: the world)
  uint64_t members = 0;          ///< its group's members as recorded (CollectiveRecord::members)
  bool p2p = false;              ///< a send against its recv
  std::string where_a, where_b;  ///< each side's file:line where recorded
  std::string group_name;        ///< "group 2 (tp, ranks 2,3)"; empty for the world
  uint64_t row_bytes = 0;        ///< split: the bytes of a row on both sides (0: told in bytes)

  /// "collective #3 (all_reduce): rank 0 has bytes 4096, rank 1 has bytes 2048", with the group
  /// first ("group 2 (tp, ranks 2,3): ...") and the callers' lines last where known; "message #1
  /// from rank 0 to rank 1: rank 0 sends bytes 64, rank 1 receives bytes 32".
  std::string describe() const;
};

/// Compares every rank's collective log (index = rank; null: no log) channel by channel
/// (analysis/channels.h): a group's collectives against its lowest rank's by number (kind, dtype,
/// root, the reduction of an all_reduce and, except for all_to_all_v, bytes), an uneven
/// all-to-all's bytes to each peer against what that peer expects from it, each send against
/// the recv of the same number (dtype, bytes). When `complete` (every rank ran the case to its
/// end), also how many each member made in each group, and how many messages each receiver took
/// of what its sender sent; a log cut short by a crash or a hang is compared only as far as it
/// goes.
std::optional<CollectiveMismatch> check_collective_logs(
    const std::vector<const std::vector<CollectiveRecord>*>& logs, bool complete);
/// The collective a world is stuck in, named while it runs: every member of a group (every rank,
/// for the world) has its flight log (index = rank, oldest first; null or empty: no decision)
/// end at the same collective #k of the group, and their calls of #k differ in kind, bytes, root
/// or an all-to-all's bytes per peer, which no transport completes consistently; or a sender and
/// its receiver are blocked in the same message with another size. A difference in dtype of the
/// same size or in the reduction alone is left to the post-mortem check: such a call completes
/// (with wrong results), and stopping it would lose the outputs. A rank still on its way to #k, or
/// past it, makes no decision: a slow rank that enters #k with the same call is never a finding.
std::optional<CollectiveMismatch> blocked_mismatch(
    const std::vector<const std::vector<CollectiveRecord>*>& logs);
/// check_collective_logs over completed ranks' captures (index = rank; null: no log).
std::optional<CollectiveMismatch> check_collectives(const std::vector<const CaseCapture*>& ranks);
/// Any execution: a rank that reported contributes its capture's log, a rank that did not the
/// collectives its flight record says it entered (RankReport::entered), so a mismatch that made
/// the backend abort or hang is still found. Counts are compared only when every rank's body
/// returned.
std::optional<CollectiveMismatch> check_collectives(const ExecutionResult& e);

/// A cross-rank check's first finding over a case's executions, and where it was seen.
template <class Mismatch>
struct Finding {
  uint64_t execution = 0;
  Mode mode = Mode::fresh;
  Mismatch mismatch;
};

/// The log checks over every completed execution (in the order given; the collective check over
/// every execution, see above): each one's first finding (the uninitialized-read check is
/// analysis/uninit_check.h).
struct CrossRankFindings {
  std::optional<Finding<LayoutMismatch>> allocation;
  std::optional<Finding<CollectiveMismatch>> collective;
  std::optional<Finding<UninitRead>> uninitialized;
  /// The other reads of never-written bytes in `uninitialized`'s execution (other buffers,
  /// other ranks), in the same order: every one is reported, the first is the finding.
  std::vector<UninitRead> more_uninitialized;
};
CrossRankFindings check_cross_rank(const std::vector<const ExecutionResult*>& executions);

}  // namespace cprr

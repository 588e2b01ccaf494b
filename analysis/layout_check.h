#pragma once
// Cross-rank checks of one execution's allocation and collective logs: what every rank must agree
// on. The symmetric pool's layout: NCCL's symmetric kernels read each peer's window at this
// rank's offset of a buffer, so the k-th symmetric allocation must have the same offset and size
// on every rank (seed 002: address-ordered reuse after rank-dependent allocations breaks that).
// The collectives: the n-th collective of every rank must be the same call (kind, dtype, size,
// root); a rank that disagrees gets wrong data, a hang or an abort.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/uninit_check.h"
#include "recorder/data/capture.h"
#include "recorder/data/execution.h"

namespace cprr {

/// The first symmetric allocation whose place differs between two ranks.
struct LayoutMismatch {
  uint64_t ordinal = 0;  ///< the k-th symmetric allocation of the case (0-based)
  int32_t rank_a = 0;    ///< the lowest rank with a log: the reference
  int32_t rank_b = 0;
  /// Each side's allocation; `present_b` false when rank b made fewer symmetric allocations
  /// (and `present_a` false when it made more).
  bool present_a = true, present_b = true;
  AllocRecord a, b;

  /// "symmetric allocation #2: rank 0 'acc' at offset 0 (4096 bytes), rank 1 'acc' at offset
  /// 8192 (4096 bytes)".
  std::string describe() const;
};

/// Checks the symmetric pool's allocations of every rank (index = rank; null: no log) against the
/// lowest rank's. Frees and other pools are not compared: their layouts may differ freely.
std::optional<LayoutMismatch> check_symmetric_layout(const std::vector<const CaseCapture*>& ranks);

/// The first collective two ranks called differently.
struct CollectiveMismatch {
  uint64_t seq = 0;  ///< the collective's number on the communicator
  int32_t rank_a = 0;
  int32_t rank_b = 0;
  std::string field;  ///< kind | dtype | bytes | root | count (a rank made fewer collectives)
  std::string value_a, value_b;

  /// "collective #3: rank 0 all_reduce with bytes 4096, rank 1 bytes 2048".
  std::string describe() const;
};

/// Compares every rank's collective log with the lowest rank's, by sequence number: kind, dtype,
/// root and (except for all_to_all_v, whose sizes differ by design) bytes; then how many
/// collectives each made.
std::optional<CollectiveMismatch> check_collectives(const std::vector<const CaseCapture*>& ranks);

/// A cross-rank check's first finding over a case's executions, and where it was seen.
template <class Mismatch>
struct Finding {
  uint64_t execution = 0;
  Mode mode = Mode::fresh;
  Mismatch mismatch;
};

/// The log checks over every completed execution (in the order given): each one's first finding
/// (the uninitialized-read check is analysis/uninit_check.h).
struct CrossRankFindings {
  std::optional<Finding<LayoutMismatch>> allocation;
  std::optional<Finding<CollectiveMismatch>> collective;
  std::optional<Finding<UninitRead>> uninitialized;
};
CrossRankFindings check_cross_rank(const std::vector<const ExecutionResult*>& executions);

}  // namespace cprr

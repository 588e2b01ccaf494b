#pragma once
// The fix of a race, computed and checked against the op log (analysis/happens_before.h uses it).
// Several earlier ops can race with one later op on one buffer: two writers on one stream, or a
// buffer filled and read on one stream, freed, and its bytes reused on another. Ordering the later
// op after the first of them leaves the others racing, so the fix is per group (all pairs that
// end at the later op on that buffer): on each other stream or rank, the group's latest op (stream
// order covers the earlier ones). It is verified by inserting exactly those edges into a copy of
// the log (an event record and wait, a stream synchronize before a host op, or a signal and its
// wait across ranks) and re-running the ordering: verified when every pair of the group is then
// ordered.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "analysis/happens_before.h"
#include "analysis/happens_before_clocks.h"

namespace cprr {

/// A racing pair oriented as reported: `first` is what the fix orders before `second`.
struct OrientedPair {
  OpId first;
  OpId second;
  std::vector<uint32_t> second_buffers;  ///< the buffers `second` names the racing bytes by
};

/// What ordering removes a group's races.
struct FixPlan {
  std::vector<OpId> after;      ///< the later op must follow each of these (one per thread)
  std::size_t group_pairs = 0;  ///< pairs of the group (ending at the later op on the buffer)
  bool verified = false;        ///< the log with those edges orders every pair of the group
};

/// The fix of the group of pairs ending at `later` whose bytes `later` names as `buffer`.
FixPlan plan_fix(const std::vector<RankOps>& ranks, const std::vector<OrientedPair>& pairs,
                 OpId later, uint32_t buffer);

}  // namespace cprr

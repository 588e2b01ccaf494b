#pragma once
// Delta debugging over a pooled case's predecessors: which earlier cases, run before the target
// in one process, are enough to make it diverge (the polluters)?
#include <cstddef>
#include <functional>
#include <vector>

namespace cprr {

/// `reproduces(subset)` replays the target after the predecessors `subset` (indices into the
/// original list, ascending, i.e. in their original order) and says whether the pollution shows.
using PolluterOracle = std::function<bool(const std::vector<std::size_t>& subset)>;

struct MinimizeResult {
  std::vector<std::size_t> polluters;  ///< a 1-minimal set of indices (ascending)
  int tests = 0;                       ///< oracle calls made (each is one replay)
};

/// Finds a 1-minimal subset of [0, n) that still reproduces. Precondition: the caller has seen
/// reproduces(all n) hold. Tries the common case first, one polluter, by bisection (test one half;
/// if it does not reproduce, the polluter is assumed in the other half), verifying the single
/// candidate with one test: ceil(log2 n) + 1 oracle calls. If the candidate does not verify
/// (polluters that act only together), falls back to ddmin (Zeller), which finds them all.
/// Identical subsets are never tested twice. n == 0 gives an empty result with no test.
MinimizeResult minimize_polluters(std::size_t n, const PolluterOracle& reproduces);

}  // namespace cprr

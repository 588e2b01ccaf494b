#pragma once
// Timing helpers shared by the benchmark programs (header-only; nothing here asserts timings).
#include <algorithm>
#include <chrono>
#include <vector>

namespace cprr::bench {

/// Best (smallest) wall-clock time of `reps` runs of `f`, in seconds; `f` waits for its own work.
template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

/// The median of `v` (0 for an empty sample).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace cprr::bench

#pragma once
// Timing helpers shared by the benchmark programs (header-only; nothing here asserts timings).
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
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

/// Wall time in ms of each of `runs` runs of the shell command `cmd` (a torchrun launch, whole);
/// empty when one fails, saying so on stderr.
inline std::vector<double> command_ms(const std::string& cmd, int runs) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(cmd.c_str());
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "failed (status %d): %s\n", status, cmd.c_str());
      return {};
    }
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return ms;
}

}  // namespace cprr::bench

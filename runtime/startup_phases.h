#pragma once
// Where a rank's start-up time goes, step by step (process set-up, CUDA context, arenas, the
// communicator...). Ranks send their steps to the controller, which lays them along the world's
// own start (engine/world.cpp) so a fresh world's cost can be read and cut (cprr_bench_gpu,
// cprecord --json).
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace cprr {

/// One step of a start-up and how long it took.
struct StartupPhase {
  std::string name;
  double ms = 0;

  template <class A>
  void serialize(A& a) {
    a(name, ms);
  }
  bool operator==(const StartupPhase&) const = default;
};

/// Milliseconds the phases in `phases` add up to.
double total_ms(const std::vector<StartupPhase>& phases);

/// Times consecutive steps: each lap() ends the step that began at the previous lap (or at
/// construction, or restart()).
class PhaseClock {
 public:
  using Clock = std::chrono::steady_clock;
  explicit PhaseClock(Clock::time_point start = Clock::now()) : last_(start) {}
  /// The next step begins now: what passed since the last lap belongs to no step.
  void restart() { last_ = Clock::now(); }
  /// Ends the current step as `name`.
  void lap(std::string name);
  /// The steps timed so far, handed over (the clock keeps timing from its last lap).
  std::vector<StartupPhase> take() { return std::exchange(phases_, {}); }

 private:
  Clock::time_point last_;
  std::vector<StartupPhase> phases_;
};

}  // namespace cprr

#include "runtime/startup_phases.h"

#include <numeric>
#include <utility>

namespace cprr {

double total_ms(const std::vector<StartupPhase>& phases) {
  return std::accumulate(phases.begin(), phases.end(), 0.0,
                         [](double sum, const StartupPhase& p) { return sum + p.ms; });
}

void PhaseClock::lap(std::string name) {
  const Clock::time_point now = Clock::now();
  phases_.push_back(
      {std::move(name), std::chrono::duration<double, std::milli>(now - last_).count()});
  last_ = now;
}

}  // namespace cprr

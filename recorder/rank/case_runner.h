#pragma once
// Runs one case execution inside a rank: reset -> body -> drain -> captures, and keeps the
// state the watchdog reports while a body is stuck.
#include <atomic>
#include <mutex>
#include <string>

#include "recorder/api/case.h"
#include "recorder/rank/environment.h"
#include "recorder/protocol/protocol.h"

namespace cprr {

class CaseRunner {
 public:
  CaseRunner(RankState& state, const Registry& registry, EnvironmentSnapshot env);

  /// Runs the case; never throws: failures become the outcome and error text.
  CaseDone run(const RunCase& msg);
  /// Thread-safe snapshot for the watchdog.
  WatchdogStatus status() const;

 private:
  enum class Phase : int { idle, reset, body, drain, capture };
  void reset(const RunCase& msg);
  void set_phase(Phase p, uint64_t execution);

  RankState& state_;
  const Registry& registry_;
  EnvironmentSnapshot env_;
  std::atomic<int> phase_{0};
  std::atomic<uint64_t> execution_{0};
};

}  // namespace cprr

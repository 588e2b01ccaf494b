#pragma once
// Fabricated rank reports, each one rank's report as the controller would have collected it: for
// the tests of the pure judging functions and for the scripted worlds of the controller tests.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/execution.h"

namespace cprr::rank_reports {

/// A rank that reported `outcome` (with `error`) for `execution`.
inline RankReport reported(RankOutcome outcome, std::string error = {}, uint64_t execution = 1) {
  RankReport rep;
  rep.done = RankResult{.execution = execution, .outcome = outcome, .error = std::move(error)};
  return rep;
}

/// A rank that ran the case to completion.
inline RankReport passed(uint64_t execution = 1) {
  return reported(RankOutcome::ok, {}, execution);
}

/// A rank whose body failed with `why`.
inline RankReport failed(std::string why) { return reported(RankOutcome::fail, std::move(why)); }

/// A rank whose body skipped the case for `why`.
inline RankReport skipped(std::string why) { return reported(RankOutcome::skip, std::move(why)); }

/// A rank whose harness failed with `why` (unknown case, broken backend).
inline RankReport errored(std::string why) { return reported(RankOutcome::error, std::move(why)); }

/// A rank that died of `signal` without reporting.
inline RankReport killed_by(int signal) {
  RankReport rep;
  rep.exit = ExitInfo{.exit_code = -1, .signal = signal};
  return rep;
}

/// A rank whose control channel broke mid-case, still running.
inline RankReport broken(std::string why) {
  RankReport rep;
  rep.protocol_error = std::move(why);
  return rep;
}

/// A rank still running at the deadline, its watchdog not asked (or silent).
inline RankReport silent() { return {}; }

/// A rank still running whose watchdog answered: in `phase`, last collective entered and completed.
inline RankReport waiting(std::string phase, int64_t entered, std::string entered_kind,
                          int64_t completed, std::vector<std::string> running = {}) {
  RankReport rep;
  rep.watchdog = WatchdogStatus{.execution = 1,
                                .phase = std::move(phase),
                                .entered_seq = entered,
                                .entered_kind = entered_kind,
                                .completed_seq = completed,
                                .completed_kind = completed >= 0 ? entered_kind : "",
                                .running = std::move(running)};
  return rep;
}

/// A rank that finished the case after running these collectives (seq, kind), in order.
inline RankReport finished_after(const std::vector<std::pair<uint64_t, std::string>>& collectives) {
  RankReport rep = passed();
  for (const auto& [seq, kind] : collectives) {
    rep.done->capture.collectives.push_back(CollectiveRecord{.seq = seq, .kind = kind});
  }
  return rep;
}

}  // namespace cprr::rank_reports

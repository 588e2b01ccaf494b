#pragma once
// The happens-before check applied to recorded executions: one execution's op logs in, its races
// out (record time, cpreplay), and a case's executions summed up as one finding.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/happens_before.h"
#include "data/execution.h"

namespace cprr {

/// The check of one execution's op logs (every rank that returned a result). Throws cprr::Error
/// when the logs contradict each other (analysis/op_accesses.h says which contradictions).
HbResult check_execution(const ExecutionResult& e, const HbOptions& options = {});

/// What the check found over a case's executions.
struct RaceFinding {
  /// The first execution (in the order given) with a race of known directions, else with a
  /// race candidate (Race::candidate: it rests on an access of unknown direction).
  uint64_t execution = 0;
  Mode mode = Mode::fresh;
  Race race;                   ///< that execution's first such race (report order)
  std::size_t race_count = 0;  ///< racing op pairs in that execution
  std::size_t executions = 0;  ///< executions with at least one race
  /// The first overlap's bytes relative to the start of the buffer the first op names.
  uint64_t buffer_begin = 0;
  uint64_t buffer_end = 0;
  /// That execution's other races (report order, at most kOtherRaces), each located in its
  /// buffer; replays confirm `race` only (the report says so). A race on the same bytes of the
  /// same buffer as one named already (another racing pair of the same bug, or the same race on
  /// another rank running the same code) is not another: its rank is in that one's
  /// `same_on_ranks` (an other's only).
  std::vector<RaceFinding> others;
  std::vector<int32_t> same_on_ranks;
};

/// How many races of an execution a finding names besides its first.
constexpr std::size_t kOtherRaces = 7;

/// Checks every execution every rank completed (a crashed rank left no log to check). `notes`
/// collects what weakened the check: the checker's notes and logs it could not read, each once.
std::optional<RaceFinding> find_race(const std::vector<const ExecutionResult*>& executions,
                                     std::vector<std::string>* notes = nullptr);

/// The race's fix as a report prints it: the instruction, how many racing pairs it orders when
/// more than this one, and whether re-checking the op log with it found them all ordered.
std::string describe_fix(const Race& race);

/// One line: "rank 0 stream 1 op #5 (kernel 'w') and rank 0 stream 0 op #9 (kernel 'r') race on
/// bytes [64, 128) of 'max_logit' (device pool of rank 0)".
std::string describe_race(const RaceFinding& finding);

/// One of a finding's `others` as the reports list it (an "also:" line): describe_race, the
/// other ranks with the same race, and that replays confirm the first race only.
std::string describe_other_race(const RaceFinding& other);

}  // namespace cprr

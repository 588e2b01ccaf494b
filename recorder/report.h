#pragma once
// What cprecord prints: the human table (with an optional colour), the --json document, and the
// case-level aggregation both share (status and verdict per case instance).
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "recorder/controller.h"

namespace cprr {

/// One case instance with all its executions (modes x repeats) and what they add up to.
struct CaseOutcome {
  const CaseInstance* instance = nullptr;
  std::vector<const ExecutionResult*> executions;
  ExecStatus status = ExecStatus::pass;  ///< the most severe execution status
  bool as_expected = true;               ///< every execution met the case's expectation
  /// Verdict vocabulary of the design brief where one is already decidable at record time:
  /// crash, hang, nondeterministic (outputs differ across repeats in one mode); else nullopt.
  std::optional<std::string> verdict;
};

std::vector<CaseOutcome> summarize(const std::vector<CaseInstance>& plan,
                                   const std::vector<ExecutionResult>& results);

struct RunInfo {
  std::string worker;
  std::string backend;
  std::string mode;
  double wall_s = 0;
};

/// The exit code cprecord returns for these outcomes: 0 all as expected, 1 a case failed or
/// diverged, 2 an infrastructure error.
int exit_code_for(const std::vector<CaseOutcome>& outcomes);

void print_table(std::ostream& out, const std::vector<ExecutionResult>& results,
                 const std::vector<CaseOutcome>& outcomes, const RunInfo& info, bool color);
void print_json(std::ostream& out, const std::vector<CaseOutcome>& outcomes, const RunInfo& info);

}  // namespace cprr

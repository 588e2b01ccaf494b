#pragma once
// What cprecord prints: the human table (with an optional colour), the --json document, and the
// case-level aggregation both share (status and verdict per case instance).
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "recorder/controller.h"
#include "recorder/divergence.h"

namespace cprr {

/// One case instance with all its executions (modes x repeats) and what they add up to.
struct CaseOutcome {
  const CaseInstance* instance = nullptr;
  int64_t case_id = 0;                   ///< the store's test_case id (what cpreplay --case takes)
  std::vector<const ExecutionResult*> executions;
  ExecStatus status = ExecStatus::pass;  ///< the most severe execution status
  bool as_expected = true;               ///< every execution met the case's expectation
  /// Verdict vocabulary of the design brief where one is already decidable at record time:
  /// crash, hang, nondeterministic (outputs differ across repeats in one mode); else nullopt.
  std::optional<std::string> verdict;
  /// Fresh vs pooled: the first divergence of a pooled execution from the fresh one (hashes or
  /// completion). A healthy case that diverges is unexpected; a seeded bug is expected to.
  std::optional<Divergence> differential;
};

/// Groups results per case instance (case_ids[i] is the store id of plan[i]) and judges them:
/// worst status, expectation, verdict, differential. A seeded bug (CaseOptions::seeded_bug) is
/// judged only on running to completion; its divergence is what it exists to show.
std::vector<CaseOutcome> summarize(const std::vector<CaseInstance>& plan,
                                   const std::vector<int64_t>& case_ids,
                                   const std::vector<ExecutionResult>& results);

struct RunInfo {
  int64_t run_id = 0;
  std::string db;
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

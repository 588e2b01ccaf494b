#pragma once
// What cprecord prints: the human table (with an optional colour), the --json document, and the
// case-level aggregation both share (status and verdict per case instance).
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "recorder/engine/controller.h"
#include "analysis/divergence.h"

namespace cprr {

/// Why an execution counts against the exit code. The table's colours, the JUnit testcases and
/// the exit code are all read from this one judgement, so they cannot disagree.
enum class Against : uint8_t {
  status,            ///< its status missed the case's expectation
  incomplete,        ///< a seeded bug that did not run to completion (its only obligation)
  differential,      ///< the pooled execution that diverged from the fresh one
  nondeterministic,  ///< its outputs differ from an earlier repeat in the same mode
};

/// One case instance with all its executions (modes x repeats) and what they add up to.
struct CaseOutcome {
  const CaseInstance* instance = nullptr;
  int64_t case_id = 0;                   ///< the store's test_case id (what cpreplay --case takes)
  std::vector<const ExecutionResult*> executions;
  ExecStatus status = ExecStatus::pass;  ///< the most severe execution status
  bool as_expected = true;               ///< nothing counts against the exit code: `against` is empty
  /// The executions that count against the exit code (execution id -> why). Empty when the
  /// case met its expectation; never empty when it did not.
  std::map<uint64_t, Against> against;
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
  std::string db;         ///< absolute path of the store
  std::string db_arg;     ///< --db as given, for the replay command printed to the user
  std::string worker;
  std::string backend;
  std::string mode;
  double wall_s = 0;
};

/// What identifies a planned instance in JSON (plan_id, name, label, params, world_size, seed,
/// expect, seeded_bug): shared by the run document and `cprecord --list --json`.
nlohmann::json instance_json(const CaseInstance& inst);

/// The command that replays case `case_id` of this run ("cpreplay --case 12", with --db when the
/// store is not the default one).
std::string replay_hint(const RunInfo& info, int64_t case_id);

/// One line saying why `execution` counts against the exit code, or nullopt when it does not.
std::optional<std::string> against_text(const CaseOutcome& o, const ExecutionResult& execution,
                                        const RunInfo& info);

/// The exit code cprecord returns for these outcomes: 0 all as expected, 1 a case failed or
/// diverged, 2 an infrastructure error.
int exit_code_for(const std::vector<CaseOutcome>& outcomes);

void print_table(std::ostream& out, const std::vector<ExecutionResult>& results,
                 const std::vector<CaseOutcome>& outcomes, const RunInfo& info, bool color);
void print_json(std::ostream& out, const std::vector<CaseOutcome>& outcomes, const RunInfo& info);

}  // namespace cprr

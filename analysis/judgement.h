#pragma once
// The record-time judgement of a run: per case instance, which executions count against the exit
// code and why, the verdict decidable from the record alone, and the fresh-vs-pooled
// differential. cprecord's exit code, table, JSON and JUnit and cpreplay --list all read it.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "analysis/compare.h"
#include "analysis/layout_check.h"
#include "analysis/race_check.h"
#include "analysis/verdict.h"
#include "data/case_info.h"
#include "data/execution.h"

namespace cprr {

/// Why an execution counts against the exit code.
enum class Against : uint8_t {
  status,            ///< its status missed the case's expectation
  incomplete,        ///< a seeded bug that did not run to completion (its only obligation)
  differential,      ///< the pooled execution that diverged from the fresh one
  nondeterministic,  ///< its outputs differ from an earlier repeat in its mode and transport
  race,              ///< its op log has a stream race and the case is not a seeded race
  /// A seeded bug whose analysis found nothing (stream_race, allocator_order,
  /// collective_mismatch; counted on the first execution).
  seeded_missed,
  allocation,     ///< its symmetric layout differs across ranks (not a seeded allocator_order)
  collective,     ///< its ranks called a collective differently (not a seeded mismatch)
  uninitialized,  ///< it reads bytes nothing wrote (not a seeded uninitialized_read)
};

/// One case instance with all its executions (modes x repeats) and what they add up to.
struct CaseOutcome {
  const CaseInstance* instance = nullptr;
  int64_t case_id = 0;  ///< the store's test_case id (what cpreplay --case takes)
  std::vector<const ExecutionResult*> executions;
  ExecStatus status = ExecStatus::pass;  ///< the most severe execution status
  bool as_expected = true;  ///< nothing counts against the exit code: `against` is empty
  /// The executions that count against the exit code (execution id -> why). Empty when the
  /// case met its expectation; never empty when it did not.
  std::map<uint64_t, Against> against;
  /// The verdict already decidable at record time (see judge_case for the order); else nullopt.
  std::optional<Verdict> verdict;
  /// Fresh vs pooled: the first divergence of a pooled execution from the fresh one. A healthy
  /// case that diverges is unexpected; a seeded bug is expected to. One across transports
  /// (Divergence::transports set) may be reduction order alone: reported, never counted.
  std::optional<Divergence> differential;
  /// The happens-before check of every completed execution's op logs (analysis/race_check.h).
  std::optional<RaceFinding> race;
  std::vector<std::string> race_notes;  ///< what weakened that check, if anything
  /// The symmetric pool's layout across ranks (analysis/layout_check.h): verdict allocator_order.
  std::optional<Finding<LayoutMismatch>> allocation;
  /// The ranks' collective logs compared: verdict collective_mismatch.
  std::optional<Finding<CollectiveMismatch>> collective_mismatch;
  /// A read of bytes nothing wrote since their allocation: verdict uninitialized_read.
  std::optional<Finding<UninitRead>> uninitialized;
  /// The other reads of never-written bytes in that execution (CrossRankFindings).
  std::vector<UninitRead> more_uninitialized;
};

/// Judges one case instance from its executions (any order of modes and repeats). A seeded bug
/// (CaseOptions::seeded_bug) is judged on running to completion, its divergence being what it
/// exists to show (a seeded "collective_mismatch" may instead crash or hang where the mismatch
/// explains it); a seeded "stream_race", "allocator_order", "uninitialized_read" or
/// "collective_mismatch" also on its check finding it. Any other case with such a finding counts
/// against the run: the bug is there whether or not the outputs showed it. A race candidate
/// (Race::candidate) is no finding yet: it neither counts nor is a verdict; a seeded
/// "stream_race" with one is not missed (cpreplay confirms or drops it). Verdict order:
/// collective_mismatch (found in the flight records too, so it names the cause of a crash or hang
/// it led to), crash, hang, allocator_order, uninitialized_read, stream_race, nondeterministic.
CaseOutcome judge_case(const CaseInstance& instance, int64_t case_id,
                       std::vector<const ExecutionResult*> executions);

/// Groups results per case instance (case_ids[i] is the store id of plan[i], plan[i].id what
/// ExecutionResult::case_id holds) and judges each that ran.
std::vector<CaseOutcome> summarize(const std::vector<CaseInstance>& plan,
                                   const std::vector<int64_t>& case_ids,
                                   const std::vector<ExecutionResult>& results);

/// The exit code for these outcomes: 0 all as expected, 1 a case failed or diverged, 2 an
/// infrastructure error (an `error` execution that was not expected).
int exit_code_for(const std::vector<CaseOutcome>& outcomes);

}  // namespace cprr

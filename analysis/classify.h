#pragma once
// Classifying an execution: from every rank's report, how the execution ended and what the
// controller must do about it. Pure: the controller does the I/O (status queries, kills, tails).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/execution.h"

namespace cprr {

/// The judgement of one execution's rank reports and the I/O it calls for.
struct Classification {
  ExecStatus status = ExecStatus::pass;
  /// One line naming the first rank at fault; empty for a pass, and for a hang until the
  /// controller fills it with diagnose_hang() after querying the watchdogs.
  std::string summary;
  /// A hang: ask the silent ranks' watchdogs (World::query_status) before diagnose_hang().
  bool needs_status_query = false;
  /// The rank whose failure (or harness error) came while others were still running, e.g.
  /// waiting in a collective it will never join; -1: none. Its failure is the status, and the
  /// controller asks the others' watchdogs what they were doing (World::query_status,
  /// describe_released) for the note.
  int released_by = -1;
  /// Crash, hang, error, interruption, ranks released mid-case, or a rank that finished with a
  /// collective a failed rank never entered (NCCL, an async op): the world is no longer trusted
  /// (its communicator is left mid-collective) and must be killed.
  bool kill_world = false;
  /// The stop descriptor fired while a rank was still running: an `error` saying nothing about
  /// the case (ExecutionResult::interrupted).
  bool interrupted = false;
  /// Why a failing world is killed when no rank was released, and the failed rank's last call
  /// that a rank which returned never entered (where a transport error came from): for the
  /// execution's note.
  std::string note;

  /// Field by field; tests compare whole judgements.
  bool operator==(const Classification&) const = default;
};

/// Judges `ranks` (one report per rank, in rank order). Precedence: a rank that died without a
/// result -> crash; a broken control channel -> crash; a rank that never answered -> an
/// interruption when `stop_requested`, else the error or fail of a rank that reported one (it
/// is why the others never finished: `released_by`), else hang; a rank's harness error -> error;
/// a failed body -> fail; else pass. The summary names the lowest rank of the deciding kind,
/// with its failure's headline (failure_headline).
Classification classify(const std::vector<RankReport>& ranks, bool stop_requested);

/// Whether the rank reported a failed body or a harness error.
bool has_failed(const RankReport& rep);

/// A call a rank entered that a rank which calls no more (`by`: one that reported a failure, or
/// one that returned) never took part in, so it can never complete: a collective of a group that
/// rank is in, numbered past what it entered there, or a message to or from it past what it
/// sent or received.
struct LeftBehind {
  int by = -1;  ///< the rank that calls no more
  CollectiveRecord call;
};
/// The first call of `log` (rank `rank`'s: its flight record or its collective log) that a failed
/// rank of `ranks` left behind; nullopt when there is none or no rank failed.
std::optional<LeftBehind> left_by_failure(const std::vector<RankReport>& ranks, int rank,
                                          const std::vector<CollectiveRecord>& log);
/// The same for a rank that returned from the case without failing (`by` names it): it
/// calls no more either, so a call of `log` it never entered can never complete (a lone
/// return). `flights` (index = rank; null: none), when given: calls each rank entered
/// besides its collective log, which leaves out those that raised in a case it ended clean
/// (Context::drop_raised_collectives); its flight record keeps them.
std::optional<LeftBehind> left_by_return(
    const std::vector<RankReport>& ranks, int rank, const std::vector<CollectiveRecord>& log,
    const std::vector<const std::vector<CollectiveRecord>*>* flights = nullptr);

/// The whole failure text (trailing newlines cut) of the rank a summary names, when it says more
/// than the summary's one line (a traceback); nullopt otherwise.
struct FailureText {
  int rank = -1;
  std::string text;
};
std::optional<FailureText> failure_beyond_summary(const std::vector<RankReport>& ranks);

/// The rank whose reported failure a summary names: the lowest with a harness error, else the
/// lowest with a failed body; -1 when no rank reported either.
int failed_rank(const std::vector<RankReport>& ranks);

}  // namespace cprr

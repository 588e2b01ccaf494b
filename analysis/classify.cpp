#include "analysis/classify.h"

#include <fmt/format.h>

#include <algorithm>

#include "analysis/channels.h"
#include "analysis/failure_headline.h"

namespace cprr {
namespace {

// The lowest rank of each kind of trouble (-1: none), each kind judged on its own.
struct FirstRanks {
  int died = -1;
  int broken = -1;
  int silent = -1;
  int failed = -1;  ///< a fail, or a skip while other ranks ran the case
  int errored = -1;
  int skipped = -1;
  bool all_skipped = false;  ///< every rank reported a skip
};

void keep_first(int& slot, bool is, int r) {
  if (is && slot < 0) slot = r;
}

FirstRanks first_ranks(const std::vector<RankReport>& ranks) {
  FirstRanks f;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const RankReport& rep = ranks[r];
    const bool broken = !rep.protocol_error.empty();
    // A rank that reported its result and then exited finished the case: only its death counts.
    keep_first(f.died, rep.exit && !rep.done, r);
    keep_first(f.broken, broken, r);
    keep_first(f.silent, !rep.done && !rep.exit && !broken, r);
    keep_first(f.failed, rep.done && rep.done->outcome == RankOutcome::fail, r);
    keep_first(f.errored, rep.done && rep.done->outcome == RankOutcome::error, r);
    keep_first(f.skipped, rep.done && rep.done->outcome == RankOutcome::skip, r);
  }
  f.all_skipped = !ranks.empty() && std::all_of(ranks.begin(), ranks.end(), [](const auto& rep) {
    return rep.done && rep.done->outcome == RankOutcome::skip;
  });
  // A rank that skips alone did not run what the others did: the execution fails, named.
  if (!f.all_skipped && f.failed < 0) f.failed = f.skipped;
  return f;
}

Classification judged(ExecStatus status, std::string summary) {
  Classification c;
  c.status = status;
  c.summary = std::move(summary);
  c.kill_world =
      status == ExecStatus::crash || status == ExecStatus::hang || status == ExecStatus::error;
  return c;
}

// A rank that finished after calling a collective a failed rank never entered left it pending
// in the transport (an NCCL kernel, an async op nobody waited for): it can never complete, and
// the world's next collective would queue behind it. "" when there is none.
std::string pending_after_failure(const std::vector<RankReport>& ranks) {
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    if (!ranks[r].done) continue;
    if (const auto left = left_by_failure(ranks, r, ranks[r].done->capture.collectives)) {
      return fmt::format(
          "rank {} called {}, which rank {} never entered before it failed, so it can never "
          "complete: the world is replaced",
          r, call_phrase(left->call), left->by);
    }
  }
  return {};
}

// Each reported rank's collective log (index = rank; null: no report).
std::vector<const std::vector<CollectiveRecord>*> collective_logs(
    const std::vector<RankReport>& ranks) {
  std::vector<const std::vector<CollectiveRecord>*> logs;
  for (const RankReport& rep : ranks) {
    logs.push_back(rep.done ? &rep.done->capture.collectives : nullptr);
  }
  return logs;
}

// The last call of failed rank `r` that a rank which returned never entered: what the failure
// likely came from (a transport error once that rank left, e.g. its group ended), or "" for none.
std::string skipped_by_finished(const std::vector<RankReport>& ranks, int r) {
  const std::vector<CollectiveRecord>& log = ranks[r].done->capture.collectives;
  if (log.empty()) return {};
  const CollectiveRecord& c = log.back();
  const std::vector<const std::vector<CollectiveRecord>*> logs = collective_logs(ranks);
  for (int m = 0; m < static_cast<int>(ranks.size()); ++m) {
    if (!has_failed(ranks[m]) && never_entered(c, r, m, logs)) {
      return fmt::format("rank {} had entered {}, which rank {} never entered: it returned "
                         "without it",
                         r, call_phrase(c, true), m);
    }
  }
  return {};
}

// "rank 1 skipped the case (why) while ranks 0,2 ran it".
std::string lone_skip(const std::vector<RankReport>& ranks, int r) {
  std::string ran;
  for (int o = 0; o < static_cast<int>(ranks.size()); ++o) {
    const bool skipped = ranks[o].done && ranks[o].done->outcome == RankOutcome::skip;
    if (!skipped) ran += fmt::format("{}{}", ran.empty() ? "" : ",", o);
  }
  return fmt::format("rank {} skipped the case ({}) while rank{} {} ran it", r,
                     failure_headline(ranks[r].done->error),
                     ran.find(',') == std::string::npos ? "" : "s", ran);
}

// The error (over a fail) of the lowest rank that reported one, as the summary names it.
Classification reported_failure(const std::vector<RankReport>& ranks, const FirstRanks& f) {
  const int r = f.errored >= 0 ? f.errored : f.failed;
  const bool skip = ranks[r].done->outcome == RankOutcome::skip;
  Classification c =
      judged(f.errored >= 0 ? ExecStatus::error : ExecStatus::fail,
             skip ? lone_skip(ranks, r)
                  : fmt::format("rank {}: {}", r, failure_headline(ranks[r].done->error)));
  c.note = pending_after_failure(ranks);
  if (!c.note.empty()) c.kill_world = true;
  if (const std::string skipped = skipped_by_finished(ranks, r); !skipped.empty()) {
    c.note += (c.note.empty() ? "" : "; ") + skipped;
  }
  return c;
}

}  // namespace

Classification classify(const std::vector<RankReport>& ranks, bool stop_requested) {
  const FirstRanks f = first_ranks(ranks);
  if (f.died >= 0) {
    return judged(ExecStatus::crash,
                  fmt::format("rank {} {}", f.died, ranks[f.died].exit->describe()));
  }
  if (f.broken >= 0) {
    // The rank's own channel broke mid-case (case code wrote to it or closed it, or the rank sent
    // something that is no answer to this execution): that rank failed this case, like a crash.
    return judged(ExecStatus::crash, fmt::format("rank {}: protocol error: {}", f.broken,
                                                 ranks[f.broken].protocol_error));
  }
  if (f.silent >= 0 && stop_requested) {
    // Its silence is the interruption's doing, not the case's: no verdict, and no watchdog query.
    Classification c =
        judged(ExecStatus::error,
               fmt::format("interrupted while rank {} was still running the case", f.silent));
    c.interrupted = true;
    return c;
  }
  if (f.silent >= 0 && (f.errored >= 0 || f.failed >= 0)) {
    // A rank that raised enters no later collective: the others' wait is its doing, not a hang.
    Classification c = reported_failure(ranks, f);
    c.released_by = failed_rank(ranks);
    c.kill_world = true;
    return c;
  }
  if (f.silent >= 0) {
    Classification c = judged(ExecStatus::hang, "");
    c.needs_status_query = true;
    return c;
  }
  if (f.errored >= 0 || f.failed >= 0) return reported_failure(ranks, f);
  if (f.all_skipped) {
    return judged(ExecStatus::skip,
                  fmt::format("skipped: {}", failure_headline(ranks[0].done->error)));
  }
  return judged(ExecStatus::pass, "");
}

int failed_rank(const std::vector<RankReport>& ranks) {
  const FirstRanks f = first_ranks(ranks);
  return f.errored >= 0 ? f.errored : f.failed;
}

bool has_failed(const RankReport& rep) { return rep.done && rep.done->outcome != RankOutcome::ok; }

std::optional<LeftBehind> left_by_failure(const std::vector<RankReport>& ranks, int rank,
                                          const std::vector<CollectiveRecord>& log) {
  const std::vector<const std::vector<CollectiveRecord>*> logs = collective_logs(ranks);
  for (const CollectiveRecord& c : log) {
    for (int f = 0; f < static_cast<int>(ranks.size()); ++f) {
      if (has_failed(ranks[f]) && never_entered(c, rank, f, logs)) return LeftBehind{f, c};
    }
  }
  return std::nullopt;
}

std::optional<LeftBehind> left_by_return(
    const std::vector<RankReport>& ranks, int rank, const std::vector<CollectiveRecord>& log,
    const std::vector<const std::vector<CollectiveRecord>*>* flights) {
  const std::vector<const std::vector<CollectiveRecord>*> logs = collective_logs(ranks);
  for (const CollectiveRecord& c : log) {
    for (int f = 0; f < static_cast<int>(ranks.size()); ++f) {
      const RankReport& rep = ranks[f];
      if (!rep.done || rep.done->outcome != RankOutcome::ok || !never_entered(c, rank, f, logs)) {
        continue;
      }
      // Entered after all, by its flight record: a call that raised, left out of its log.
      if (flights != nullptr && f < static_cast<int>(flights->size()) && (*flights)[f] &&
          !never_entered(c, rank, f, *flights)) {
        continue;
      }
      return LeftBehind{f, c};
    }
  }
  return std::nullopt;
}

std::optional<FailureText> failure_beyond_summary(const std::vector<RankReport>& ranks) {
  const int r = failed_rank(ranks);
  if (r < 0) return std::nullopt;
  std::string text = ranks[r].done->error;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.find('\n') == std::string::npos) return std::nullopt;  // the summary has it all
  return FailureText{r, std::move(text)};
}

}  // namespace cprr

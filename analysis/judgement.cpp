#include "analysis/judgement.h"

#include <algorithm>
#include <string>
#include <utility>

namespace cprr {
namespace {

int severity(ExecStatus s) {
  switch (s) {
    case ExecStatus::pass:
      return 0;
    case ExecStatus::skip:
      return 1;
    case ExecStatus::fail:
      return 2;
    case ExecStatus::hang:
      return 3;
    case ExecStatus::crash:
      return 4;
    case ExecStatus::error:
      return 5;
  }
  return 5;
}

// Per mode and transport: the first completed execution whose output hashes differ from the
// first one's. Two transports may differ by reduction order alone, so they are never compared.
const ExecutionResult* varying_execution(const std::vector<const ExecutionResult*>& execs) {
  std::map<std::pair<Mode, std::string>, std::vector<uint64_t>> first;
  for (const ExecutionResult* e : execs) {
    if (!completed(*e)) continue;
    std::vector<uint64_t> hashes;
    for (const RankReport& r : e->ranks) {
      if (!r.done) continue;  // a failed execution's rank may have no result
      for (const Capture& c : r.done->capture.outputs) hashes.push_back(c.digest.whole);
    }
    const auto [it, inserted] = first.emplace(std::pair(e->mode, e->collectives), hashes);
    if (!inserted && it->second != hashes) return e;
  }
  return nullptr;
}

// A cross-rank finding counts against the run unless the case is the seeded bug it names; a
// seeded bug its check did not find counts too.
template <class F>
void judge_finding(CaseOutcome& o, const std::optional<F>& finding, uint64_t execution,
                   Verdict names, Against against) {
  const bool seeded = o.instance->info.options.seeded_bug == verdict_name(names);
  if (finding && !seeded) o.against.emplace(execution, against);
  if (!finding && seeded && !o.executions.empty()) {
    o.against.emplace(o.executions.front()->id, Against::seeded_missed);
  }
}

}  // namespace

CaseOutcome judge_case(const CaseInstance& instance, int64_t case_id,
                       std::vector<const ExecutionResult*> executions) {
  CaseOutcome o;
  o.instance = &instance;
  o.case_id = case_id;
  o.executions = std::move(executions);
  if (std::all_of(o.executions.begin(), o.executions.end(),
                  [](const ExecutionResult* e) { return e->status == ExecStatus::skip; })) {
    // Skipped wherever it ran: nothing ran to judge, and nothing counts against the run.
    o.status = ExecStatus::skip;
    o.as_expected = true;
    return o;
  }
  const bool seeded = !instance.info.options.seeded_bug.empty();
  // A seeded collective mismatch may well abort or hang the backend: an execution the mismatch
  // explains did what the seeded bug does.
  const bool seeded_mismatch =
      instance.info.options.seeded_bug == verdict_name(Verdict::collective_mismatch);
  for (const ExecutionResult* e : o.executions) {
    if (severity(e->status) > severity(o.status)) o.status = e->status;
    const bool explained = seeded_mismatch && check_collectives(*e).has_value();
    if (seeded ? !completed(*e) && !explained : !meets(e->status, instance.info.options.expect)) {
      o.against.emplace(e->id, seeded ? Against::incomplete : Against::status);
    }
  }
  if (const auto diff = fresh_vs_pool(o.executions)) {
    o.differential = diff->divergence;
    // Across transports it may be reduction order alone: reported (its text says so), not counted.
    const bool across = !diff->divergence.transports.empty();
    if (!seeded && !across) o.against.emplace(diff->pooled->id, Against::differential);
  }
  o.race = find_race(o.executions, &o.race_notes);
  const bool candidate = o.race && o.race->race.candidate;
  // A candidate rests on a guess (an access of unknown direction): it neither counts against
  // the run nor misses a seeded race; the replays that show it or not decide (verdict.h).
  if (!candidate) {
    judge_finding(o, o.race, o.race ? o.race->execution : 0, Verdict::stream_race, Against::race);
  }
  CrossRankFindings cross = check_cross_rank(o.executions);
  o.allocation = std::move(cross.allocation);
  judge_finding(o, o.allocation, o.allocation ? o.allocation->execution : 0,
                Verdict::allocator_order, Against::allocation);
  o.collective_mismatch = std::move(cross.collective);
  o.uninitialized = std::move(cross.uninitialized);
  o.more_uninitialized = std::move(cross.more_uninitialized);
  judge_finding(o, o.uninitialized, o.uninitialized ? o.uninitialized->execution : 0,
                Verdict::uninitialized_read, Against::uninitialized);
  judge_finding(o, o.collective_mismatch,
                o.collective_mismatch ? o.collective_mismatch->execution : 0,
                Verdict::collective_mismatch, Against::collective);
  const ExecutionResult* varying = varying_execution(o.executions);
  if (o.collective_mismatch) {
    o.verdict = Verdict::collective_mismatch;  // also when it made the backend abort or hang
  } else if (o.status == ExecStatus::crash || o.status == ExecStatus::hang) {
    o.verdict = o.status == ExecStatus::crash ? Verdict::crash : Verdict::hang;
  } else if (o.allocation) {
    o.verdict = Verdict::allocator_order;
  } else if (o.uninitialized) {
    o.verdict = Verdict::uninitialized_read;
  } else if (o.race && !candidate) {
    o.verdict = Verdict::stream_race;  // the cause of any varying output, named
  } else if (varying) {
    o.verdict = Verdict::nondeterministic;
    if (!seeded) o.against.emplace(varying->id, Against::nondeterministic);
  }
  o.as_expected = o.against.empty();
  return o;
}

std::vector<CaseOutcome> summarize(const std::vector<CaseInstance>& plan,
                                   const std::vector<int64_t>& case_ids,
                                   const std::vector<ExecutionResult>& results) {
  std::vector<CaseOutcome> out;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    std::vector<const ExecutionResult*> executions;
    for (const ExecutionResult& e : results) {
      if (e.case_id == plan[i].id) executions.push_back(&e);
    }
    if (executions.empty()) continue;
    const int64_t case_id = i < case_ids.size() ? case_ids[i] : plan[i].id;
    out.push_back(judge_case(plan[i], case_id, std::move(executions)));
  }
  return out;
}

int exit_code_for(const std::vector<CaseOutcome>& outcomes) {
  int code = 0;
  for (const CaseOutcome& o : outcomes) {
    if (o.status == ExecStatus::error && !o.as_expected) return 2;
    if (!o.as_expected) code = 1;
  }
  return code;
}

}  // namespace cprr

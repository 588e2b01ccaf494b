#include "replayer/replay_all.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "analysis/judgement.h"
#include "data/text_forms.h"
#include "runtime/error.h"
#include "schema/record_reader.h"

namespace cprr {
namespace {

// Why a case is worth replaying, from the judgement of its recorded executions; "" when not.
std::string pick_reason(const CaseOutcome& o) {
  if (!o.as_expected) return "not as expected";
  if (o.verdict) return std::string(verdict_name(*o.verdict));
  // Across transports the record cannot tell reduction order from a leak; a replay of both modes
  // on one machine can.
  if (o.differential) {
    return o.differential->transports.empty() ? "fresh and pooled differ"
                                              : "fresh and pooled differ across transports";
  }
  return {};
}

std::string expected_verdict(const CaseInstance& inst) {
  const CaseOptions& opt = inst.info.options;
  if (!opt.seeded_bug.empty()) return opt.seeded_bug;
  if (opt.expect == Expect::crash) return "crash";
  if (opt.expect == Expect::hang) return "hang";
  return "reproduced";
}

}  // namespace

std::string Places::only_on() const {
  if (failing.size() != 1 || failing.begin()->empty() || passing.empty()) return {};
  return passing.contains(*failing.begin()) ? std::string() : *failing.begin();
}

bool TriageRow::as_expected() const {
  if (!report) return false;
  if (expected == "reproduced") return report->exit_code() == 0;
  return verdict_name(report->verdict) == expected;
}

std::string TriageRow::where() const {
  if (!report) return "not replayed: the replay budget (--max-replays) was spent";
  const ReplayReport& r = *report;
  if (r.collective_mismatch) return r.collective_mismatch->mismatch.describe();
  if (r.allocation) return r.allocation->mismatch.describe();
  if (r.uninitialized) return r.uninitialized->mismatch.describe();
  if (r.race) return describe_race(*r.race);
  if (!r.polluters.empty()) {
    std::string ids;
    for (const RecordedCase& p : r.polluters)
      ids += fmt::format("{}{}", ids.empty() ? "" : ", ", p.id);
    return fmt::format("polluted by case(s) {}", ids);
  }
  if (r.first_divergence) return r.first_divergence->describe();
  return {};
}

int Triage::exit_code() const {
  for (const TriageRow& row : rows) {
    if (!row.as_expected()) return 1;
  }
  return 0;
}

Triage triage_run(const TriageOptions& o, ReplayProgress progress, void* user) {
  if (o.max_replays < 1)
    CPRR_THROW_AS(UsageError, "--max-replays {}: give at least 1", o.max_replays);
  const RecordReader reader(o.replay.db);
  const auto runs = reader.runs();
  if (runs.empty()) CPRR_THROW_AS(UsageError, "{} holds no run to triage", o.replay.db);
  Triage t;
  t.run_id = o.run_id.value_or(reader.latest_run("--all").id);
  const auto run = std::find_if(runs.begin(), runs.end(),
                                [&](const RecordedRun& r) { return r.id == t.run_id; });
  if (run == runs.end()) {
    CPRR_THROW_AS(UsageError, "--run {}: {} has no such run (see --list)", t.run_id, o.replay.db);
  }
  // A shard merged into another run (cprecord --merge): its cases are the merged run's.
  if (run->merged_into) t.run_id = *run->merged_into;
  Places run_places;
  for (const RecordedCase& c : reader.cases()) {
    if (c.run_id != t.run_id) continue;
    ++t.cases_in_run;
    const auto execs = reader.executions(c.id, RecordReader::Detail::logs);
    std::vector<const ExecutionResult*> results;
    Places places;
    for (const RecordedExecution& e : execs) {
      results.push_back(&e.result);
      places.add(e.result);
      run_places.add(e.result);
    }
    const CaseOutcome outcome = judge_case(c.instance, c.id, results);
    std::string why = pick_reason(outcome);
    if (!why.empty()) {
      t.rows.push_back(TriageRow{c, std::move(why), std::nullopt, expected_verdict(c.instance),
                                 places.only_on()});
    }
  }
  t.only_on = run_places.only_on();
  for (TriageRow& row : t.rows) {
    if (t.replays >= o.max_replays) break;
    ReplayOptions ro = o.replay;
    ro.case_id = row.recorded.id;
    if (progress != nullptr) {
      progress(
          fmt::format("case {} {} ({})", row.recorded.id, row.recorded.instance.label(), row.why),
          user);
    }
    row.report = replay_case(ro, nullptr, nullptr);
    t.replays += row.report->replays;
    if (t.code_changes.empty()) t.code_changes = row.report->code_changes;
  }
  return t;
}

void print_triage_text(std::ostream& out, const Triage& t) {
  std::size_t width = 5;
  for (const TriageRow& r : t.rows) width = std::max(width, r.recorded.instance.label().size());
  out << fmt::format("run {}: {} of {} case(s) failed, diverged or got a verdict\n", t.run_id,
                     t.rows.size(), t.cases_in_run);
  if (!t.only_on.empty()) {
    out << fmt::format(
        "every execution not as expected ran on {}, and every one elsewhere was as expected: "
        "suspect that device (cpreplay --case N --pin replays there)\n",
        t.only_on);
  }
  for (const std::string& change : t.code_changes) {
    out << fmt::format(
        "warning: {}: the replays ran the code as it is now, so their verdicts "
        "may reflect the change (--strict refuses)\n",
        change);
  }
  out << fmt::format("{:>5}  {:<{}}  {:<19}  {:<19}  {:>7}  {}\n", "case", "label", width,
                     "verdict", "expected", "replays", "where");
  for (const TriageRow& r : t.rows) {
    const std::string verdict =
        r.report ? std::string(verdict_name(r.report->verdict)) : std::string("-");
    out << fmt::format("{:>5}  {:<{}}  {:<19}  {:<19}  {:>7}  {}{}{}\n", r.recorded.id,
                       r.recorded.instance.label(), width, verdict, r.expected,
                       r.report ? r.report->replays : 0,
                       r.as_expected() ? "" : "UNEXPECTED: ", r.where().substr(0, 200),
                       r.only_on.empty() ? "" : "; fails only on " + r.only_on);
  }
  out << fmt::format("{} replay(s); {}\n", t.replays,
                     t.exit_code() == 0 ? "every verdict as expected" : "some verdicts unexpected");
}

void print_triage_json(std::ostream& out, const Triage& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (const TriageRow& r : t.rows) {
    rows.push_back(
        {{"case", r.recorded.id},
         {"label", r.recorded.instance.label()},
         {"picked_because", r.why},
         {"verdict", r.report ? nlohmann::json(verdict_name(r.report->verdict)) : nlohmann::json()},
         {"expected", r.expected},
         {"as_expected", r.as_expected()},
         {"where", r.where()},
         {"fails_only_on", r.only_on},
         {"replays", r.report ? r.report->replays : 0}});
  }
  out << nlohmann::json{{"tool", "cpreplay"},
                        {"run", t.run_id},
                        {"cases_in_run", t.cases_in_run},
                        {"cases", std::move(rows)},
                        {"replays", t.replays},
                        {"code_changes", t.code_changes},
                        {"fails_only_on", t.only_on},
                        {"exit_code", t.exit_code()}}
             .dump(2)
      << '\n';
}

}  // namespace cprr

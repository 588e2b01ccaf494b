#include "replayer/replay_list.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>
#include <utility>
#include <vector>

#include "analysis/judgement.h"
#include "data/text_forms.h"
#include "recorder/engine/launcher.h"
#include "schema/record_reader.h"

namespace cprr {
namespace {

struct CaseRow {
  RecordedCase c;
  std::vector<RecordedExecution> execs;
  CaseOutcome outcome;  // the same judgement cprecord made of these executions
};

std::string statuses(const std::vector<RecordedExecution>& execs) {
  std::string out;
  for (const auto& e : execs) {
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", mode_name(e.result.mode),
                       status_name(e.result.status));
  }
  return out;
}

// Where a GPU world's collectives went, e.g. "collectives gloo_staged, ranks on GPUs 0,0,0,0";
// when the case's executions differ, one part per transport and GPU map after the modes that ran
// it ("fresh: ...; pool: ..."). "" on the cpu backend (its gloo is all it has) and for executions
// no world ran.
std::string transports(const std::vector<RecordedExecution>& execs) {
  std::vector<std::pair<std::string, std::string>> parts;  // text, the modes that ran it
  for (const auto& e : execs) {
    const ExecutionResult& r = e.result;
    if (r.collectives.empty() || r.collectives == kCollectivesGloo) continue;
    const std::string text =
        fmt::format("collectives {}{}", r.collectives,
                    r.rank_gpus.empty() ? "" : ", ranks on GPUs " + r.rank_gpus);
    const std::string mode(mode_name(r.mode));
    auto it =
        std::find_if(parts.begin(), parts.end(), [&](const auto& p) { return p.first == text; });
    if (it == parts.end()) {
      parts.emplace_back(text, mode);
    } else if (it->second.find(mode) == std::string::npos) {
      it->second += "+" + mode;
    }
  }
  if (parts.size() == 1) return parts[0].first;
  std::string out;
  for (const auto& [text, modes] : parts) {
    out += fmt::format("{}{}: {}", out.empty() ? "" : "; ", modes, text);
  }
  return out;
}

// Every case of the file with its executions (op logs included) and cprecord's judgement.
std::vector<CaseRow> case_rows(const RecordReader& reader) {
  std::vector<RecordedCase> cases = reader.cases();
  std::vector<CaseRow> rows;
  rows.reserve(cases.size());  // no reallocation: each outcome points into its own row
  for (RecordedCase& c : cases) {
    rows.push_back(CaseRow{std::move(c), {}, {}});
    CaseRow& row = rows.back();
    // With the op logs: the judgement includes the race check, as cprecord's did.
    row.execs = reader.executions(row.c.id, RecordReader::Detail::logs);
    std::vector<const ExecutionResult*> results;
    for (const RecordedExecution& e : row.execs) results.push_back(&e.result);
    row.outcome = judge_case(row.c.instance, row.c.id, std::move(results));
  }
  return rows;
}

nlohmann::json run_json(const RecordedRun& r) {
  return {{"id", r.id},
          {"started_at", r.started_at},
          {"complete", r.finished_at.has_value()},
          {"exit_code", r.exit_code ? nlohmann::json(*r.exit_code) : nlohmann::json()},
          {"stopped", r.stopped ? nlohmann::json(*r.stopped) : nlohmann::json()},
          {"shuffle_seed", r.shuffle_seed ? nlohmann::json(*r.shuffle_seed) : nlohmann::json()},
          {"mode", r.mode},
          {"backend", backend_name(r.backend)},
          {"launcher", describe(r.launch)},
          {"worker", r.worker},
          {"uid", r.uid},
          {"shard", r.shard},
          {"merged_into", r.merged_into ? nlohmann::json(*r.merged_into) : nlohmann::json()}};
}

nlohmann::json case_json(const CaseRow& row) {
  nlohmann::json ex = nlohmann::json::array();
  for (const auto& e : row.execs) {
    ex.push_back({{"id", e.id},
                  {"mode", mode_name(e.result.mode)},
                  {"status", status_name(e.result.status)},
                  {"world", e.result.world_id},
                  {"position", e.result.pool_position},
                  {"collectives", e.result.collectives},
                  {"rank_gpus", e.result.rank_gpus}});
  }
  return {{"id", row.c.id},
          {"run", row.c.run_id},
          {"name", row.c.instance.info.name},
          {"label", row.c.instance.label()},
          {"executions", std::move(ex)},
          {"fresh_vs_pool_differs", row.outcome.differential.has_value()},
          {"fresh_vs_pool_across_transports",
           row.outcome.differential && !row.outcome.differential->transports.empty()},
          {"verdict", row.outcome.verdict ? nlohmann::json(verdict_name(*row.outcome.verdict))
                                          : nlohmann::json()},
          {"stream_race",
           row.outcome.race ? nlohmann::json(describe_race(*row.outcome.race)) : nlohmann::json()},
          {"as_expected", row.outcome.as_expected}};
}

std::string run_line(const RecordedRun& r) {
  // A shard merged into another run (cprecord --merge) holds that run's executions, not cases.
  const std::string part =
      r.merged_into
          ? fmt::format(" shard={} of run {}", r.shard.empty() ? "1/1" : r.shard, *r.merged_into)
      : r.shard.empty() ? ""
                        : " shard=" + r.shard;
  return fmt::format("run {}: {} mode={} backend={}{}{}{} {}\n", r.id, r.started_at, r.mode,
                     backend_name(r.backend), part,
                     r.launch.kind == LauncherKind::local
                         ? ""
                         : fmt::format(" launcher={}", launcher_name(r.launch.kind)),
                     r.shuffle_seed ? fmt::format(" shuffled={}", *r.shuffle_seed) : "",
                     r.finished_at ? fmt::format("exit {}{}", r.exit_code.value_or(-1),
                                                 r.stopped ? "; stopped by " + *r.stopped : "")
                                   : std::string("INCOMPLETE (the recorder did not finish)"));
}

std::string case_line(const CaseRow& row) {
  const std::string how = transports(row.execs);
  const auto& diff = row.outcome.differential;
  return fmt::format("{:>5}  run {}  {:<48}  {}{}{}{}\n", row.c.id, row.c.run_id,
                     row.c.instance.label(), statuses(row.execs), how.empty() ? "" : "  " + how,
                     !diff                      ? ""
                     : diff->transports.empty() ? "  <- fresh and pooled differ"
                                                : "  <- fresh and pooled differ across transports",
                     !row.outcome.race                  ? ""
                     : row.outcome.race->race.candidate ? "  <- stream race candidate"
                                                        : "  <- stream race");
}

}  // namespace

void list_db(std::ostream& out, const std::string& db, bool json) {
  const RecordReader reader(db);
  const auto runs = reader.runs();
  const std::vector<CaseRow> rows = case_rows(reader);
  if (json) {
    nlohmann::json jr = nlohmann::json::array(), jc = nlohmann::json::array();
    for (const auto& r : runs) jr.push_back(run_json(r));
    for (const auto& row : rows) jc.push_back(case_json(row));
    out << nlohmann::json{{"tool", "cpreplay"},
                          {"db", db},
                          {"runs", std::move(jr)},
                          {"cases", std::move(jc)}}
               .dump(2)
        << '\n';
    return;
  }
  for (const auto& r : runs) out << run_line(r);
  for (const auto& row : rows) out << case_line(row);
}

}  // namespace cprr

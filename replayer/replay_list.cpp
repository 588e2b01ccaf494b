// cpreplay --list: the runs and cases a database holds, with each case's recorded statuses and
// whether its fresh and pooled executions differ (the cases worth replaying first).
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <ostream>

#include "analysis/divergence.h"
#include "recorder/data/text_forms.h"
#include "schema/record_reader.h"

namespace cprr {
namespace {

struct CaseRow {
  RecordedCase c;
  std::vector<RecordedExecution> execs;
  bool differs = false;
};

std::vector<const CaseCapture*> captures_of(const ExecutionResult& e) {
  std::vector<const CaseCapture*> out;
  for (const RankReport& r : e.ranks) out.push_back(r.done ? &r.done->capture : nullptr);
  return out;
}

bool fresh_and_pool_differ(const std::vector<RecordedExecution>& execs) {
  const ExecutionResult* fresh = nullptr;
  const ExecutionResult* pool = nullptr;
  for (const auto& e : execs) {
    if (e.result.mode == Mode::fresh && fresh == nullptr) fresh = &e.result;
    if (e.result.mode == Mode::pool && pool == nullptr) pool = &e.result;
  }
  if (fresh == nullptr || pool == nullptr) return false;
  return fresh->status != pool->status ||
         first_divergence(captures_of(*fresh), captures_of(*pool)).has_value();
}

std::string statuses(const std::vector<RecordedExecution>& execs) {
  std::string out;
  for (const auto& e : execs) {
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", mode_name(e.result.mode),
                       status_name(e.result.status));
  }
  return out;
}

}  // namespace

void list_db(std::ostream& out, const std::string& db, bool json) {
  const RecordReader reader(db);
  const auto runs = reader.runs();
  std::vector<CaseRow> rows;
  for (RecordedCase& c : reader.cases()) {
    CaseRow row{std::move(c), {}, false};
    row.execs = reader.executions(row.c.id);
    row.differs = fresh_and_pool_differ(row.execs);
    rows.push_back(std::move(row));
  }
  if (json) {
    nlohmann::json jr = nlohmann::json::array(), jc = nlohmann::json::array();
    for (const auto& r : runs) {
      jr.push_back({{"id", r.id}, {"started_at", r.started_at}, {"complete", r.finished_at.has_value()},
                    {"exit_code", r.exit_code ? nlohmann::json(*r.exit_code) : nlohmann::json()},
                    {"mode", r.mode}, {"backend", r.backend}, {"worker", r.worker}});
    }
    for (const auto& row : rows) {
      nlohmann::json ex = nlohmann::json::array();
      for (const auto& e : row.execs) {
        ex.push_back({{"id", e.id}, {"mode", mode_name(e.result.mode)},
                      {"status", status_name(e.result.status)}, {"world", e.result.world_id},
                      {"position", e.result.pool_position}});
      }
      jc.push_back({{"id", row.c.id}, {"run", row.c.run_id}, {"name", row.c.instance.info.name},
                    {"label", row.c.instance.label()}, {"executions", std::move(ex)},
                    {"fresh_vs_pool_differs", row.differs}});
    }
    out << nlohmann::json{{"tool", "cpreplay"}, {"db", db}, {"runs", std::move(jr)}, {"cases", std::move(jc)}}.dump(2)
        << '\n';
    return;
  }
  for (const auto& r : runs) {
    out << fmt::format("run {}: {} mode={} backend={} {}\n", r.id, r.started_at, r.mode, r.backend,
                       r.finished_at ? fmt::format("exit {}", r.exit_code.value_or(-1))
                                     : std::string("INCOMPLETE (the recorder did not finish)"));
  }
  for (const auto& row : rows) {
    out << fmt::format("{:>5}  run {}  {:<48}  {}{}\n", row.c.id, row.c.run_id, row.c.instance.label(),
                       statuses(row.execs), row.differs ? "  <- fresh and pooled differ" : "");
  }
}

}  // namespace cprr

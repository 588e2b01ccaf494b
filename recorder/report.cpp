#include "recorder/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace cprr {
namespace {

int severity(ExecStatus s) {
  switch (s) {
    case ExecStatus::pass: return 0;
    case ExecStatus::fail: return 1;
    case ExecStatus::hang: return 2;
    case ExecStatus::crash: return 3;
    case ExecStatus::error: return 4;
  }
  return 4;
}

// Per mode: do the completed executions agree on every rank's output hashes?
bool outputs_vary(const std::vector<const ExecutionResult*>& execs) {
  std::map<Mode, std::vector<std::vector<uint64_t>>> seen;
  for (const ExecutionResult* e : execs) {
    if (e->status != ExecStatus::pass && e->status != ExecStatus::fail) continue;
    std::vector<uint64_t> hashes;
    for (const RankReport& r : e->ranks) {
      for (const Capture& c : r.done->capture.outputs) hashes.push_back(c.digest.whole);
    }
    auto& list = seen[e->mode];
    if (!list.empty() && list.front() != hashes) return true;
    list.push_back(std::move(hashes));
  }
  return false;
}

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

nlohmann::json rank_json(int r, const RankReport& rep) {
  nlohmann::json j{{"rank", r}};
  if (rep.done) {
    static constexpr const char* kOutcome[] = {"ok", "fail", "error"};
    j["outcome"] = kOutcome[static_cast<int>(rep.done->outcome)];
    j["error"] = rep.done->error;
    nlohmann::json outs = nlohmann::json::array();
    for (const Capture& c : rep.done->capture.outputs) {
      outs.push_back({{"name", c.name}, {"bytes", c.bytes}, {"hash", hex(c.digest.whole)}});
    }
    j["outputs"] = std::move(outs);
  } else {
    j["outcome"] = rep.exit ? "died" : "no_result";
  }
  if (rep.exit) {
    j["signal"] = rep.exit->signal;
    j["exit_code"] = rep.exit->signal == 0 ? nlohmann::json(rep.exit->exit_code) : nlohmann::json();
  }
  if (!rep.protocol_error.empty()) j["protocol_error"] = rep.protocol_error;
  return j;
}

nlohmann::json execution_json(const ExecutionResult& e) {
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t r = 0; r < e.ranks.size(); ++r) ranks.push_back(rank_json(static_cast<int>(r), e.ranks[r]));
  return {{"id", e.id},          {"mode", mode_name(e.mode)},     {"world", e.world_id},
          {"position", e.pool_position}, {"status", status_name(e.status)},
          {"as_expected", e.as_expected}, {"summary", e.summary}, {"note", e.note}, {"wall_ms", e.wall_ms},
          {"startup_ms", e.startup_ms},   {"ranks", std::move(ranks)}};
}

}  // namespace

std::vector<CaseOutcome> summarize(const std::vector<CaseInstance>& plan,
                                   const std::vector<ExecutionResult>& results) {
  std::vector<CaseOutcome> out;
  for (const CaseInstance& inst : plan) {
    CaseOutcome o;
    o.instance = &inst;
    for (const ExecutionResult& e : results) {
      if (e.case_id != inst.id) continue;
      o.executions.push_back(&e);
      if (severity(e.status) > severity(o.status)) o.status = e.status;
      o.as_expected = o.as_expected && e.as_expected;
    }
    if (o.executions.empty()) continue;
    if (o.status == ExecStatus::crash || o.status == ExecStatus::hang) {
      o.verdict = std::string(status_name(o.status));
    } else if (outputs_vary(o.executions)) {
      o.verdict = "nondeterministic";
      o.as_expected = false;
    }
    out.push_back(std::move(o));
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

void print_json(std::ostream& out, const std::vector<CaseOutcome>& outcomes, const RunInfo& info) {
  nlohmann::json cases = nlohmann::json::array();
  int unexpected = 0;
  for (const CaseOutcome& o : outcomes) {
    const CaseInstance& inst = *o.instance;
    nlohmann::json execs = nlohmann::json::array();
    for (const ExecutionResult* e : o.executions) execs.push_back(execution_json(*e));
    unexpected += o.as_expected ? 0 : 1;
    cases.push_back({{"id", inst.id},
                     {"name", inst.info.name},
                     {"label", inst.label()},
                     {"params", inst.params},
                     {"world_size", inst.world_size},
                     {"seed", inst.seed},
                     {"expect", expect_name(inst.info.options.expect)},
                     {"status", status_name(o.status)},
                     {"as_expected", o.as_expected},
                     {"verdict", o.verdict ? nlohmann::json(*o.verdict) : nlohmann::json()},
                     {"executions", std::move(execs)}});
  }
  nlohmann::json doc{{"tool", "cprecord"},
                     {"version", CPRR_VERSION},
                     {"run", nullptr},
                     {"worker", info.worker},
                     {"backend", info.backend},
                     {"mode", info.mode},
                     {"wall_s", info.wall_s},
                     {"cases", std::move(cases)},
                     {"unexpected", unexpected},
                     {"exit_code", exit_code_for(outcomes)}};
  out << doc.dump(2) << '\n';
}

}  // namespace cprr

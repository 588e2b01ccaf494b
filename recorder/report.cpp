#include "recorder/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
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

bool completed(const ExecutionResult& e) {
  return e.status == ExecStatus::pass || e.status == ExecStatus::fail;
}

std::vector<const CaseCapture*> captures_of(const ExecutionResult& e) {
  std::vector<const CaseCapture*> out;
  for (const RankReport& r : e.ranks) out.push_back(r.done ? &r.done->capture : nullptr);
  return out;
}

// The first pooled execution that differs from the first fresh one, if both modes ran.
std::optional<Divergence> fresh_vs_pool(const std::vector<const ExecutionResult*>& execs) {
  const ExecutionResult* fresh = nullptr;
  for (const ExecutionResult* e : execs) {
    if (e->mode == Mode::fresh && completed(*e)) {
      fresh = e;
      break;
    }
  }
  if (fresh == nullptr) return std::nullopt;
  for (const ExecutionResult* e : execs) {
    if (e->mode != Mode::pool || !completed(*e)) continue;
    if (auto d = first_divergence(captures_of(*fresh), captures_of(*e))) return d;
    if (e->status != fresh->status) {
      Divergence d;
      d.kind = "result";
      d.reason = "status";
      d.expected = std::string(status_name(fresh->status));
      d.actual = std::string(status_name(e->status));
      return d;
    }
  }
  return std::nullopt;
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
                                   const std::vector<int64_t>& case_ids,
                                   const std::vector<ExecutionResult>& results) {
  std::vector<CaseOutcome> out;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const CaseInstance& inst = plan[i];
    CaseOutcome o;
    o.instance = &inst;
    o.case_id = i < case_ids.size() ? case_ids[i] : inst.id;
    for (const ExecutionResult& e : results) {
      if (e.case_id != inst.id) continue;
      o.executions.push_back(&e);
      if (severity(e.status) > severity(o.status)) o.status = e.status;
      o.as_expected = o.as_expected && e.as_expected;
    }
    if (o.executions.empty()) continue;
    const bool seeded = !inst.info.options.seeded_bug.empty();
    o.differential = fresh_vs_pool(o.executions);
    if (seeded) {
      o.as_expected = std::all_of(o.executions.begin(), o.executions.end(),
                                  [](const ExecutionResult* e) { return completed(*e); });
    } else if (o.differential) {
      o.as_expected = false;
    }
    if (o.status == ExecStatus::crash || o.status == ExecStatus::hang) {
      o.verdict = std::string(status_name(o.status));
    } else if (outputs_vary(o.executions)) {
      o.verdict = "nondeterministic";
      o.as_expected = o.as_expected && seeded;
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
    nlohmann::json diff;
    if (o.differential) {
      const Divergence& d = *o.differential;
      diff = {{"rank", d.rank}, {"kind", d.kind}, {"name", d.name}, {"reason", d.reason},
              {"byte_range", {d.byte_begin, d.byte_end}}, {"detail", d.describe()}};
    }
    cases.push_back({{"id", o.case_id},
                     {"plan_id", inst.id},
                     {"name", inst.info.name},
                     {"label", inst.label()},
                     {"params", inst.params},
                     {"world_size", inst.world_size},
                     {"seed", inst.seed},
                     {"expect", expect_name(inst.info.options.expect)},
                     {"status", status_name(o.status)},
                     {"as_expected", o.as_expected},
                     {"verdict", o.verdict ? nlohmann::json(*o.verdict) : nlohmann::json()},
                     {"seeded_bug", inst.info.options.seeded_bug},
                     {"fresh_vs_pool", std::move(diff)},
                     {"executions", std::move(execs)}});
  }
  nlohmann::json doc{{"tool", "cprecord"},
                     {"version", CPRR_VERSION},
                     {"run", info.run_id},
                     {"db", info.db},
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

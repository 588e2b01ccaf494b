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

bool completed(const ExecutionResult& e) {
  return e.status == ExecStatus::pass || e.status == ExecStatus::fail;
}

// Per mode: the first completed execution whose output hashes differ from the mode's first one.
const ExecutionResult* varying_execution(const std::vector<const ExecutionResult*>& execs) {
  std::map<Mode, std::vector<uint64_t>> first;
  for (const ExecutionResult* e : execs) {
    if (!completed(*e)) continue;
    std::vector<uint64_t> hashes;
    for (const RankReport& r : e->ranks) {
      for (const Capture& c : r.done->capture.outputs) hashes.push_back(c.digest.whole);
    }
    const auto [it, inserted] = first.emplace(e->mode, hashes);
    if (!inserted && it->second != hashes) return e;
  }
  return nullptr;
}

std::vector<const CaseCapture*> captures_of(const ExecutionResult& e) {
  std::vector<const CaseCapture*> out;
  for (const RankReport& r : e.ranks) out.push_back(r.done ? &r.done->capture : nullptr);
  return out;
}

struct Differential {
  Divergence divergence;
  const ExecutionResult* pooled = nullptr;  // the pooled execution that diverged
};

// The first pooled execution that differs from the first fresh one, if both modes ran.
std::optional<Differential> fresh_vs_pool(const std::vector<const ExecutionResult*>& execs) {
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
    if (auto d = first_divergence(captures_of(*fresh), captures_of(*e))) return Differential{*d, e};
    if (e->status != fresh->status) {
      Divergence d;
      d.kind = "result";
      d.reason = "status";
      d.expected = std::string(status_name(fresh->status));
      d.actual = std::string(status_name(e->status));
      return Differential{d, e};
    }
  }
  return std::nullopt;
}

// Fills o.against: which executions count against the exit code, and why. A seeded bug owes
// only running to completion; its divergence and failures are what it exists to show.
void judge(CaseOutcome& o, bool seeded) {
  for (const ExecutionResult* e : o.executions) {
    if (seeded ? !completed(*e) : !e->as_expected) {
      o.against.emplace(e->id, seeded ? Against::incomplete : Against::status);
    }
  }
  if (const auto diff = fresh_vs_pool(o.executions)) {
    o.differential = diff->divergence;
    if (!seeded) o.against.emplace(diff->pooled->id, Against::differential);
  }
  if (o.status == ExecStatus::crash || o.status == ExecStatus::hang) {
    o.verdict = std::string(status_name(o.status));
  } else if (const ExecutionResult* varying = varying_execution(o.executions)) {
    o.verdict = "nondeterministic";
    if (!seeded) o.against.emplace(varying->id, Against::nondeterministic);
  }
  o.as_expected = o.against.empty();
}

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

// Quotes a path for a POSIX shell when it holds anything but plainly safe characters.
std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                                                       "qrstuvwxyz0123456789_./-+=:,@%") ==
                                       std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

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

nlohmann::json execution_json(const ExecutionResult& e, bool as_expected) {
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t r = 0; r < e.ranks.size(); ++r) ranks.push_back(rank_json(static_cast<int>(r), e.ranks[r]));
  return {{"id", e.id},          {"mode", mode_name(e.mode)},     {"attempt", e.attempt},
          {"world", e.world_id},         {"position", e.pool_position},
          {"status", status_name(e.status)},
          {"as_expected", as_expected}, {"summary", e.summary}, {"note", e.note}, {"wall_ms", e.wall_ms},
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
    }
    if (o.executions.empty()) continue;
    judge(o, !inst.info.options.seeded_bug.empty());
    out.push_back(std::move(o));
  }
  return out;
}

nlohmann::json instance_json(const CaseInstance& inst) {
  return {{"plan_id", inst.id},
          {"name", inst.info.name},
          {"label", inst.label()},
          {"params", inst.params},
          {"world_size", inst.world_size},
          {"seed", inst.seed},
          {"expect", expect_name(inst.info.options.expect)},
          {"seeded_bug", inst.info.options.seeded_bug}};
}

std::string replay_hint(const RunInfo& info, int64_t case_id) {
  if (info.db_arg.empty() || info.db_arg == "cprr.db") return fmt::format("cpreplay --case {}", case_id);
  return fmt::format("cpreplay --db {} --case {}", shell_quote(info.db_arg), case_id);
}

std::optional<std::string> against_text(const CaseOutcome& o, const ExecutionResult& e,
                                        const RunInfo& info) {
  const auto it = o.against.find(e.id);
  if (it == o.against.end()) return std::nullopt;
  const CaseInstance& inst = *o.instance;
  switch (it->second) {
    case Against::status:
      return fmt::format("{}, expected {}{}", status_name(e.status),
                         expect_name(inst.info.options.expect),
                         e.summary.empty() ? "" : ": " + e.summary);
    case Against::incomplete:
      return fmt::format("seeded bug ({}) did not run to completion: {}{}",
                         inst.info.options.seeded_bug, status_name(e.status),
                         e.summary.empty() ? "" : ": " + e.summary);
    case Against::differential:
      return fmt::format("case {}: fresh and pooled differ: {}; replay: {}", o.case_id,
                         o.differential ? o.differential->describe() : "?",
                         replay_hint(info, o.case_id));
    case Against::nondeterministic:
      return fmt::format("case {}: outputs differ from an earlier repeat in {} mode; replay: {}",
                         o.case_id, mode_name(e.mode), replay_hint(info, o.case_id));
  }
  return std::nullopt;
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
    for (const ExecutionResult* e : o.executions) {
      nlohmann::json ej = execution_json(*e, o.against.count(e->id) == 0);
      if (const auto why = against_text(o, *e, info)) ej["unexpected"] = *why;
      execs.push_back(std::move(ej));
    }
    unexpected += o.as_expected ? 0 : 1;
    nlohmann::json diff;
    if (o.differential) {
      const Divergence& d = *o.differential;
      diff = {{"rank", d.rank}, {"kind", d.kind}, {"name", d.name}, {"reason", d.reason},
              {"byte_range", {d.byte_begin, d.byte_end}}, {"detail", d.describe()}};
    }
    nlohmann::json c = instance_json(inst);
    c.update({{"id", o.case_id},
              {"status", status_name(o.status)},
              {"as_expected", o.as_expected},
              {"verdict", o.verdict ? nlohmann::json(*o.verdict) : nlohmann::json()},
              {"fresh_vs_pool", std::move(diff)},
              {"executions", std::move(execs)}});
    cases.push_back(std::move(c));
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

#include "cli/report.h"

#include <fmt/format.h>
#include <string.h>

#include <nlohmann/json.hpp>

#include "analysis/op_accesses.h"
#include "data/text_forms.h"

namespace cprr {
namespace {

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

// Quotes a path for a POSIX shell when it holds anything but plainly safe characters.
std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                                       "qrstuvwxyz0123456789_./-+=:,@%") == std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

nlohmann::json rank_json(int r, const RankReport& rep) {
  nlohmann::json j{{"rank", r}};
  if (rep.done) {
    j["outcome"] = outcome_name(rep.done->outcome);
    j["error"] = rep.done->error;
    nlohmann::json outs = nlohmann::json::array();
    for (const Capture& c : rep.done->capture.outputs) {
      outs.push_back({{"name", c.name}, {"bytes", c.bytes}, {"hash", hex(c.digest.whole)}});
    }
    j["outputs"] = std::move(outs);
  } else {
    j["outcome"] = report_outcome_name(rep);
  }
  if (rep.exit) {
    j["signal"] = rep.exit->signal;
    j["exit_code"] = rep.exit->signal == 0 ? nlohmann::json(rep.exit->exit_code) : nlohmann::json();
  }
  if (!rep.protocol_error.empty()) j["protocol_error"] = rep.protocol_error;
  return j;
}

// `as_expected` means what the store's execution.as_expected means (its status meets the case's
// expect); `counts_against_run` whether the run's judgement held it against the exit status (a
// pooled execution that passed yet diverged from the fresh one does).
nlohmann::json execution_json(const ExecutionResult& e, bool counts_against_run) {
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t r = 0; r < e.ranks.size(); ++r)
    ranks.push_back(rank_json(static_cast<int>(r), e.ranks[r]));
  nlohmann::json groups = nlohmann::json::array();
  for (const GroupRecord& g : groups_of(e)) {
    groups.push_back({{"id", g.id}, {"ranks", g.ranks}, {"backend", g.backend}, {"name", g.name}});
  }
  nlohmann::json phases = nlohmann::json::array();  // in order: they add up to startup_ms
  for (const StartupPhase& p : e.startup_phases)
    phases.push_back({{"phase", p.name}, {"ms", p.ms}});
  nlohmann::json first_use = nlohmann::json::array();  // paid inside the case: in wall_ms
  for (const StartupPhase& p : e.first_use_phases)
    first_use.push_back({{"phase", p.name}, {"ms", p.ms}});
  return {{"id", e.id},
          {"mode", mode_name(e.mode)},
          {"attempt", e.attempt},
          {"world", e.world_id},
          {"position", e.pool_position},
          {"status", status_name(e.status)},
          {"as_expected", e.as_expected},
          {"counts_against_run", counts_against_run},
          {"summary", e.summary},
          {"note", e.note},
          {"wall_ms", e.wall_ms},
          {"startup_ms", e.startup_ms},
          {"startup_phases", std::move(phases)},
          {"first_use_phases", std::move(first_use)},
          {"symmetric_pool", e.symmetric_pool},
          {"collectives", e.collectives},
          {"rank_gpus", e.rank_gpus},
          {"groups", std::move(groups)},
          {"ranks", std::move(ranks)}};
}

}  // namespace

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

namespace {

nlohmann::json race_op_json(const RaceOp& op) {
  return {{"rank", op.rank}, {"stream", op.stream},     {"op", op.seq},           {"kind", op.kind},
          {"name", op.name}, {"inferred", op.inferred}, {"detail", op.describe()}};
}

}  // namespace

nlohmann::json allocation_json(const Finding<LayoutMismatch>& f) {
  const LayoutMismatch& m = f.mismatch;
  const auto side = [](int32_t rank, bool present, const AllocRecord& a) {
    if (!present) return nlohmann::json{{"rank", rank}, {"present", false}};
    return nlohmann::json{{"rank", rank},       {"present", true},  {"name", a.name},
                          {"offset", a.offset}, {"bytes", a.bytes}, {"alloc_event", a.seq}};
  };
  return {{"pool", m.pool},
          {"ordinal", m.ordinal},
          {"ranks", {side(m.rank_a, m.present_a, m.a), side(m.rank_b, m.present_b, m.b)}},
          {"execution", f.execution},
          {"mode", mode_name(f.mode)},
          {"detail", m.describe()}};
}

namespace {

// One read of never-written bytes: the reading op, the buffer, the bytes, how they came there.
nlohmann::json read_json(const UninitRead& u) {
  return {{"rank", u.rank},     {"op", u.op},
          {"stream", u.stream}, {"kind", u.op_kind},
          {"name", u.op_name},  {"buffer", u.buffer_name},
          {"pool", u.pool},     {"byte_range", {u.begin, u.end}},
          {"copied", u.copied}, {"detail", u.describe()}};
}

}  // namespace

nlohmann::json uninitialized_json(const Finding<UninitRead>& f,
                                  const std::vector<UninitRead>& more) {
  nlohmann::json out = read_json(f.mismatch);
  out["execution"] = f.execution;
  out["mode"] = mode_name(f.mode);
  out["more"] = nlohmann::json::array();
  for (const UninitRead& m : more) out["more"].push_back(read_json(m));
  return out;
}

nlohmann::json collective_json(const Finding<CollectiveMismatch>& f) {
  const CollectiveMismatch& m = f.mismatch;
  return {{"seq", m.seq},
          {"group", m.group},
          {"p2p", m.p2p},
          {"kind", m.kind.empty() ? nlohmann::json() : nlohmann::json(m.kind)},
          {"field", m.field},
          {"ranks", {m.rank_a, m.rank_b}},
          {"values", {m.value_a, m.value_b}},
          {"execution", f.execution},
          {"mode", mode_name(f.mode)},
          {"detail", m.describe()}};
}

/// The execution's other races, each as its ops, bytes and one line (replays confirm the first
/// race only).
nlohmann::json more_races_json(const RaceFinding& f) {
  nlohmann::json out = nlohmann::json::array();
  for (const RaceFinding& other : f.others) {
    const RaceOverlap& o = other.race.overlaps.front();
    out.push_back({{"first", race_op_json(other.race.first)},
                   {"second", race_op_json(other.race.second)},
                   {"candidate", other.race.candidate},
                   {"buffer", o.first_buffer_name},
                   {"byte_range", {other.buffer_begin, other.buffer_end}},
                   {"fix", other.race.fix},
                   {"same_on_ranks", other.same_on_ranks},
                   {"detail", describe_race(other)}});
  }
  return out;
}

nlohmann::json race_json(const RaceFinding& f, const std::vector<std::string>& confirmed_by) {
  const Race& r = f.race;
  const RaceOverlap& o = r.overlaps.front();
  nlohmann::json buffers = nlohmann::json::array({o.first_buffer_name});
  if (o.second_buffer_name != o.first_buffer_name || o.second_buffer != o.first_buffer) {
    buffers.push_back(o.second_buffer_name);
  }
  nlohmann::json fix_after = nlohmann::json::array();
  for (const RaceOp& op : r.fix_after) fix_after.push_back(race_op_json(op));
  return {{"first", race_op_json(r.first)},
          {"second", race_op_json(r.second)},
          {"candidate", r.candidate},
          {"buffer", o.first_buffer_name},
          {"buffers", std::move(buffers)},
          {"byte_range", {f.buffer_begin, f.buffer_end}},
          {"pool", pool_name(o.pool)},
          {"memory_rank", o.memory_rank},
          {"streams", {r.first.stream, r.second.stream}},
          {"ranks", {r.first.rank, r.second.rank}},
          {"fix", r.fix},
          {"fix_after", fix_after},
          {"fix_verified", r.fix_verified},
          {"group_pairs", r.group_pairs},
          {"execution", f.execution},
          {"mode", mode_name(f.mode)},
          {"race_count", f.race_count},
          {"executions_with_race", f.executions},
          {"confirmed_by", confirmed_by},
          {"detail", describe_race(f)},
          {"more", more_races_json(f)}};
}

std::string replay_hint(const RunInfo& info, int64_t case_id) {
  if (info.db_arg.empty() || info.db_arg == "cprr.db")
    return fmt::format("cpreplay --case {}", case_id);
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
    case Against::race:
      return fmt::format("case {}: stream race: {}; fix: {}; replay: {}", o.case_id,
                         o.race ? describe_race(*o.race) : "?",
                         o.race ? describe_fix(o.race->race) : "?", replay_hint(info, o.case_id));
    case Against::seeded_missed:
      return fmt::format(
          "seeded bug ({}) not found: its check found nothing in the logs of {} "
          "execution(s){}",
          inst.info.options.seeded_bug, o.executions.size(),
          o.race_notes.empty() ? "" : "; " + o.race_notes.front());
    case Against::allocation:
      return fmt::format(
          "case {}: allocator order: the symmetric layout differs across ranks: {}; "
          "replay: {}",
          o.case_id, o.allocation ? o.allocation->mismatch.describe() : "?",
          replay_hint(info, o.case_id));
    case Against::uninitialized:
      return fmt::format("case {}: uninitialized read: {}; replay: {}", o.case_id,
                         o.uninitialized ? o.uninitialized->mismatch.describe() : "?",
                         replay_hint(info, o.case_id));
    case Against::collective:
      return fmt::format("case {}: collective mismatch: {}; replay: {}", o.case_id,
                         o.collective_mismatch ? o.collective_mismatch->mismatch.describe() : "?",
                         replay_hint(info, o.case_id));
  }
  return std::nullopt;
}

void print_json(std::ostream& out, const std::vector<CaseOutcome>& outcomes, const RunInfo& info) {
  nlohmann::json cases = nlohmann::json::array();
  int unexpected = 0;
  for (const CaseOutcome& o : outcomes) {
    const CaseInstance& inst = *o.instance;
    nlohmann::json execs = nlohmann::json::array();
    for (const ExecutionResult* e : o.executions) {
      nlohmann::json ej = execution_json(*e, o.against.count(e->id) != 0);
      if (const auto why = against_text(o, *e, info)) ej["unexpected"] = *why;
      execs.push_back(std::move(ej));
    }
    unexpected += o.as_expected ? 0 : 1;
    nlohmann::json diff;
    if (o.differential) {
      const Divergence& d = *o.differential;
      diff = {{"rank", d.rank},
              {"kind", d.kind},
              {"name", d.name},
              {"reason", d.reason},
              {"byte_range", {d.byte_begin, d.byte_end}},
              {"across_transports", !d.transports.empty()},
              {"detail", d.describe()}};
    }
    nlohmann::json c = instance_json(inst);
    c.update({{"id", o.case_id},
              {"status", status_name(o.status)},
              {"as_expected", o.as_expected},
              {"verdict", o.verdict ? nlohmann::json(verdict_name(*o.verdict)) : nlohmann::json()},
              {"fresh_vs_pool", std::move(diff)},
              {"race", o.race ? race_json(*o.race) : nlohmann::json()},
              {"race_notes", o.race_notes},
              {"allocation", o.allocation ? allocation_json(*o.allocation) : nlohmann::json()},
              {"uninitialized_read",
               o.uninitialized ? uninitialized_json(*o.uninitialized, o.more_uninitialized)
                               : nlohmann::json()},
              {"collective_mismatch",
               o.collective_mismatch ? collective_json(*o.collective_mismatch) : nlohmann::json()},
              {"executions", std::move(execs)}});
    cases.push_back(std::move(c));
  }
  nlohmann::json doc{
      {"tool", "cprecord"},
      {"version", CPRR_VERSION},
      {"run", info.run_id},
      {"db", info.db},
      {"worker", info.worker},
      {"backend", backend_name(info.backend)},
      {"mode", info.mode},
      {"wall_s", info.wall_s},
      {"cases", std::move(cases)},
      {"unexpected", unexpected},
      {"exit_code", info.exit_code},
      {"stopped", info.stopped ? nlohmann::json(*info.stopped) : nlohmann::json()},
      {"interrupted_by", info.signal != 0
                             ? nlohmann::json(fmt::format("SIG{}", sigabbrev_np(info.signal)))
                             : nlohmann::json()},
      {"shuffle_seed", info.shuffle_seed ? nlohmann::json(*info.shuffle_seed) : nlohmann::json()},
      {"launcher", info.launcher}};
  out << doc.dump(2) << '\n';
}

}  // namespace cprr

#include "replayer/replay.h"

#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <deque>
#include <functional>

#include "analysis/classify.h"
#include "analysis/compare.h"
#include "cli/cli_options.h"
#include "cli/code_files.h"
#include "cli/trace.h"
#include "recorder/engine/controller.h"
#include "recorder/engine/job_slots.h"
#include "recorder/engine/plan.h"
#include "recorder/engine/world.h"
#include "recorder/launch/port_claim.h"
#include "replayer/ddmin.h"
#include "replayer/direction_probe.h"
#include "replayer/race_confirmation.h"
#include "runtime/error.h"
#include "runtime/transport_choice.h"

namespace cprr {
namespace {

// A Python run's case files as its worker took them (--cases PATH ...), for messages.
std::string case_files(const RecordedRun& run) {
  std::vector<std::string> paths;
  for (std::size_t i = 0; i + 1 < run.worker_args.size(); ++i) {
    if (run.worker_args[i] == "--cases") paths.push_back(run.worker_args[i + 1]);
  }
  return fmt::format("{}", fmt::join(paths, " "));
}

// Everything needed to run the recorded case again: the controller set-up and the instances.
class Rebuild {
 public:
  /// `recorded_ports`: the MASTER_PORTs the record's executions had, taken again where free.
  Rebuild(const ReplayOptions& o, const RecordedRun& run, const std::vector<int>& recorded_ports,
          ReplayReport& report)
      : report_(report),
        port_(PortClaim::first_free(master_port_base(), recorded_ports)),
        placement_(parse_placement(run.placement).value_or(Placement::best_fit)),
        worlds_(o.worlds) {
    const std::string& worker = o.shared.worker;
    config_.worker = worker.empty() ? run.worker : worker;
    // A Python run's worker takes its case files first; another --worker takes what it holds.
    if (worker.empty()) config_.worker_args = run.worker_args;
    if (::access(config_.worker.c_str(), X_OK) != 0) {
      CPRR_THROW_AS(UsageError,
                    "worker {} (recorded in run {}) is not an executable file: pass --worker with "
                    "the path of a worker binary holding the same cases",
                    config_.worker, run.id);
    }
    config_.backend = run.backend;
    config_.env = run.environment;
    // CUDA loads a kernel's module at its first launch (lazy loading) and that load waits for the
    // whole device: a stream op delayed by the race amplification would be waited for by an
    // unordered kernel launched for the first time, and the race could never show. Replays load
    // every module when the rank starts instead.
    const bool loading_set =
        std::any_of(config_.env.begin(), config_.env.end(),
                    [](const auto& kv) { return kv.first == "CUDA_MODULE_LOADING"; });
    if (run.backend == BackendKind::cuda && !loading_set)
      config_.env.emplace_back("CUDA_MODULE_LOADING", "EAGER");
    if (!o.pinned_gpus.empty()) set_env(config_.env, "CUDA_VISIBLE_DEVICES", o.pinned_gpus);
    config_.launch = o.launch.value_or(run.launch);
    check_shared(o.shared);
    check_collectives(o.shared.run.requested(), run.backend);
    apply_shared(o.shared, config_);
    config_.master_port = port_.port();
  }

  /// The MASTER_PORT the replays' ranks get.
  int master_port() const { return port_.port(); }

  /// Refuses, before anything runs, a worker that is no cprr worker or lacks one of `cases`
  /// (a rebuilt binary, another --worker): those replays would say nothing about the case.
  /// A Python run's are its case files, not a worker binary: what is said of them is about
  /// those files.
  void require_cases(const std::vector<const CaseInstance*>& cases, const RecordedRun& run) const {
    const bool python = !config_.worker_args.empty();
    Catalog catalog;
    try {
      catalog = fetch_catalog(config_.worker, config_.worker_args);
    } catch (const std::exception& e) {
      if (python) {
        CPRR_THROW("cannot load the case files of run {} ({}): {}", run.id, case_files(run),
                   e.what());
      }
      CPRR_THROW("cannot replay with worker {}: {}", config_.worker, e.what());
    }
    for (const CaseInstance* c : cases) {
      const bool known = std::any_of(catalog.cases.begin(), catalog.cases.end(),
                                     [&](const CaseInfo& i) { return i.name == c->info.name; });
      if (known) continue;
      if (python) {
        CPRR_THROW_AS(UsageError,
                      "the case files of run {} ({}) no longer define a case named {}: it was "
                      "renamed or removed since the record; restore it, or record the run again",
                      run.id, case_files(run), c->info.name);
      }
      CPRR_THROW_AS(UsageError,
                    "worker {} has no case named {}: pass --worker with the binary that "
                    "recorded the run",
                    config_.worker, c->info.name);
    }
  }

  /// The target alone in a fresh world, perturbed as a race confirmation asks, under the run's
  /// placement policy or `placement`. `then`: how many more fresh replays of the target are
  /// certain to follow this one, whatever it shows (pooled ones between them aside); with
  /// --standby the worlds of the first N of them start now (foresee names this one first).
  ExecutionResult fresh(const CaseInstance& target, int then, const Perturbation& perturbation = {},
                        std::optional<Placement> placement = std::nullopt) {
    // One controller for every fresh replay, so that their worlds can stand by in it.
    if (!fresh_) fresh_.emplace(config_, make_worlds());
    if (config_.run.standby > 0)
      fresh_->foresee(std::vector<int>(then + 1, target.world_size), true);
    ++report_.replays;
    return ran(fresh_->run(target, Mode::fresh, placement.value_or(placement_), perturbation));
  }

  /// `before` in order, then the target, in one new pooled world; the target's result.
  ExecutionResult pooled(const std::vector<const CaseInstance*>& before,
                         const CaseInstance& target) {
    Controller c(config_, make_worlds());
    for (const CaseInstance* p : before) c.run(*p, Mode::pool, placement_);
    ++report_.replays;
    return ran(c.run(target, Mode::pool, placement_));
  }

 private:
  // A replay whose world could not start says nothing about the case: it is an infrastructure
  // error (exit 2) naming the worker, never a verdict. An `error` from a started world (a case
  // that broke its backend, a throwing reset hook) is the case's, and gets a verdict.
  ExecutionResult ran(ExecutionResult r) const {
    if (r.interrupted)
      CPRR_THROW_AS(Interrupted, "the {} replay was interrupted", mode_name(r.mode));
    if (r.status == ExecStatus::error && r.world_id == 0) {
      CPRR_THROW("the {} replay of case {} could not run with worker {}: {}", mode_name(r.mode),
                 r.label, config_.worker, r.summary.empty() ? "no result" : r.summary);
    }
    return r;
  }

  std::unique_ptr<WorldFactory> make_worlds() const {
    return worlds_ ? worlds_() : std::make_unique<ProcessWorlds>(nodes_);
  }

  ReplayReport& report_;
  PortClaim port_;  ///< held while the replays run: no other cprr run on this host takes it
  ControllerConfig config_;
  Placement placement_;
  std::function<std::unique_ptr<WorldFactory>()> worlds_;
  /// Every replay's launched worlds share one set of node agents: one launcher job per cpreplay.
  /// Declared before the controllers, so it outlives their worlds.
  std::shared_ptr<LaunchedNodes> nodes_ = std::make_shared<LaunchedNodes>();
  std::optional<Controller> fresh_;  ///< made at the first fresh replay
};

const RecordedExecution* first_of(const std::vector<RecordedExecution>& execs, Mode mode) {
  for (const auto& e : execs) {
    if (e.result.mode == mode) return &e;
  }
  return nullptr;
}

std::string describe(const ExecutionResult& r) {
  return r.summary.empty() ? std::string(status_name(r.status))
                           : fmt::format("{} ({})", status_name(r.status), r.summary);
}

// The whole traceback (or multi-line message) of the rank a failed replay's summary names, which
// shows only its last line; not again when the other replay's is the same text.
void say_traceback(const ExecutionResult& r, const char* which, std::string& said,
                   const std::function<void(const std::string&)>& say) {
  const std::optional<FailureText> failure = failure_beyond_summary(r.ranks);
  if (!failure || failure->text == said) return;
  said = failure->text;
  say(fmt::format("rank {} in the {} replay:\n{}", failure->rank, which, failure->text));
}

// Delta-debugs the predecessors: which of them, run before the target, make it diverge from the
// clean fresh result? Each oracle call is one pooled replay in a new world (which --standby does
// not start ahead: standby worlds are for fresh executions only).
void localize_leak(const std::vector<RecordedCase>& preds, const CaseInstance& target,
                   const ExecutionResult& clean, Rebuild& rb, ReplayReport& rep,
                   const std::function<void(const std::string&)>& say) {
  const PolluterOracle oracle = [&](const std::vector<std::size_t>& subset) {
    std::vector<const CaseInstance*> before;
    for (std::size_t i : subset) before.push_back(&preds[i].instance);
    const ExecutionResult r = rb.pooled(before, target);
    ++rep.ddmin_replays;
    const bool leaks = compare(clean, r).has_value();
    say(fmt::format("ddmin replay {}: {} predecessor(s) -> {}", rep.ddmin_replays, subset.size(),
                    leaks ? "diverges" : "clean"));
    return leaks;
  };
  for (std::size_t i : minimize_polluters(preds.size(), oracle).polluters) {
    rep.polluters.push_back(preds[i]);
  }
}

// One fresh probe replay when an op of the logs was handed buffers with no direction
// (replayer/direction_probe.h): `all` then points at copies (kept in `learned`) that carry what
// each such op wrote and left unchanged.
void learn_directions(std::vector<const ExecutionResult*>& all,
                      std::deque<ExecutionResult>& learned, const CaseInstance& target, Rebuild& rb,
                      ReplayReport& rep, const std::function<void(const std::string&)>& say) {
  if (std::none_of(all.begin(), all.end(),
                   [](const ExecutionResult* e) { return has_unknown_directions(*e); })) {
    return;
  }
  Perturbation p;
  p.probe_touches = true;
  // New allocations hold a pattern, not a fresh process's zeros: a kernel zero-filling its output
  // changes them, where in the recorded runs (stale bytes) it did too.
  p.poison = 0x5a5a5a5a5a5a5a5aull;
  const ExecutionResult probe = rb.fresh(target, 0, p);
  rep.probe_replays = 1;
  if (!completed(probe)) {
    say(
        fmt::format("probe replay ended {}: what the ops handed buffers with no direction write "
                    "stays unknown",
                    status_name(probe.status)));
    return;
  }
  std::string mismatch;
  for (const ExecutionResult*& e : all) {
    ExecutionResult copy = *e;
    const ProbeApplied applied = apply_probe(probe, copy);
    if (mismatch.empty()) mismatch = applied.mismatch;
    if (applied.ops == 0) continue;
    learned.push_back(std::move(copy));
    e = &learned.back();
  }
  // Said of the run's own op numbers, and only of the ops that took the probe's directions.
  if (!learned.empty()) rep.learned = describe_learned(learned.front(), 8);
  say(
      fmt::format("probe replay: learned what the ops handed buffers with no direction wrote; "
                  "{} of {} execution(s) checked with it",
                  learned.size(), all.size()));
  for (const std::string& line : rep.learned) say("  learned: " + line);
  if (!mismatch.empty()) say("probe replay took another path from there: " + mismatch);
}

// The happens-before check over every op log there is (`all`: recorded and replayed, none
// perturbed).
void find_races(const std::vector<const ExecutionResult*>& all, ReplayReport& rep,
                const std::function<void(const std::string&)>& say) {
  rep.race = find_race(all, &rep.race_notes);
  for (const std::string& note : rep.race_notes) say("race check weakened: " + note);
}

// The dynamic checks that confirm the race find_races named (perturbed fresh replays); `after`:
// the fresh replays certain to come once they are done.
void confirm_races(const std::vector<const ExecutionResult*>& all, const CaseInstance& target,
                   Rebuild& rb, ReplayReport& rep,
                   const std::function<void(const std::string&)>& say, int after) {
  if (!rep.race) return;
  std::vector<const ExecutionResult*> unperturbed_fresh;
  for (const ExecutionResult* e : all) {
    if (e->mode == Mode::fresh) unperturbed_fresh.push_back(e);
  }
  say(std::string(rep.race->race.candidate ? "stream race candidate in the op log (an access of "
                                             "unknown direction: the replays confirm or drop it): "
                                           : "stream race in the op log: ") +
      describe_race(*rep.race) + "; fix: " + describe_fix(rep.race->race));
  for (const RaceFinding& other : rep.race->others) say("  also: " + describe_other_race(other));
  uint64_t ops_on_rank = 0;
  for (const ExecutionResult* e : all) {
    const auto r = static_cast<std::size_t>(rep.race->race.second.rank);
    if (e->id == rep.race->execution && r < e->ranks.size() && e->ranks[r].done) {
      ops_on_rank = e->ranks[r].done->capture.ops.size();
      break;
    }
  }
  const PerturbedRun run = [&](const Perturbation& p, int then) {
    return rb.fresh(target, then + after, p);
  };
  rep.confirmation = confirm_race(*rep.race, unperturbed_fresh, ops_on_rank, run);
  for (const std::string& line : rep.confirmation->log) say(line);
}

// Whether the replays showed the report's race (RaceConfirmation::shows).
bool shown(const ReplayReport& rep) {
  return rep.race && rep.confirmation && rep.confirmation->shows(rep.race->race);
}

// A race candidate no replay showed is no finding: it goes to the race notes, and the report
// names no race (the op may well only read the bytes its access of unknown direction covers).
void drop_candidate(ReplayReport& rep, const std::function<void(const std::string&)>& say) {
  const bool changed = rep.confirmation && !rep.confirmation->confirmed_by.empty();
  const std::string note = fmt::format(
      "a race candidate that {} replay(s) did not show{}, so no finding: {}",
      rep.confirmation ? rep.confirmation->replays : 0,
      changed ? " (the outputs changed, but the sync bisection put their cause elsewhere)" : "",
      describe_race(*rep.race));
  say(note);
  rep.race_notes.push_back(note);
  rep.race.reset();
}

// Race candidates replayed at most per case, the finding's own first: each costs a confirmation's
// replays (up to about ten), and an execution's first candidate may well be two kernels reading
// one weight.
constexpr std::size_t kCandidatesTried = 3;

// A race candidate no replay showed gives way to the execution's next one (race.others, in
// report order), up to kCandidatesTried in all, so a pair that only reads shared bytes does not
// hide the pair that races. Each one dropped goes to the race notes (drop_candidate).
void confirm_candidates(const std::vector<const ExecutionResult*>& all, const CaseInstance& target,
                        Rebuild& rb, ReplayReport& rep,
                        const std::function<void(const std::string&)>& say, int after) {
  for (std::size_t tried = 1; rep.race && rep.race->race.candidate && !shown(rep); ++tried) {
    std::vector<RaceFinding> rest = std::move(rep.race->others);
    const std::size_t count = rep.race->race_count, executions = rep.race->executions;
    drop_candidate(rep, say);
    std::erase_if(rest, [](const RaceFinding& f) { return !f.race.candidate; });
    if (rest.empty()) return;
    if (tried >= kCandidatesTried) {
      const std::string note = fmt::format(
          "{} more race candidate(s) of that execution not replayed (at most {} are): first {}",
          rest.size(), kCandidatesTried, describe_race(rest.front()));
      say(note);
      rep.race_notes.push_back(note);
      return;
    }
    RaceFinding next = std::move(rest.front());
    rest.erase(rest.begin());
    next.others = std::move(rest);
    next.race_count = count;
    next.executions = executions;
    rep.race = std::move(next);
    confirm_races(all, target, rb, rep, say, after);
  }
}

// Two fresh replays with every new allocation poisoned by a different pattern: outputs that follow
// the pattern read bytes nothing wrote. `after`: the fresh replays certain to come after them.
constexpr int kPoisonReplays = 2;
// Returns whether both poisoned replays completed (their outputs could show the read).
bool confirm_uninitialized(const CaseInstance& target, Rebuild& rb, ReplayReport& rep,
                           const std::function<void(const std::string&)>& say, int after) {
  say("uninitialized read in the op log: " + rep.uninitialized->mismatch.describe());
  for (const UninitRead& more : rep.more_uninitialized) say("  also: " + more.describe());
  Perturbation a, b;
  a.poison = 0xa5a5a5a5a5a5a5a5ull;
  b.poison = 0x5a5a5a5a5a5a5a5aull;
  const ExecutionResult ra = rb.fresh(target, after + 1, a);
  const ExecutionResult rb_ = rb.fresh(target, after, b);
  rep.poison_replays = kPoisonReplays;
  if (!completed(ra) || !completed(rb_)) {
    say("poison replays did not both complete: no confirmation");
    return false;
  }
  if (const auto d = compare(ra, rb_)) {
    rep.poison_confirmed = true;
    say("poison confirms: the outputs follow the poison pattern: " + d->describe());
  } else {
    say("poison: both patterns gave the same outputs (the unwritten bytes do not reach them)");
  }
  return true;
}

// An allocator-order or uninitialized-read verdict: the case again under every placement policy.
// Which policies move the symmetric layout apart or change the outputs (against the replay under
// the run's own policy) says how much the result hangs on where the allocator puts things.
constexpr std::array kPlacements{Placement::best_fit, Placement::counter, Placement::never_reuse,
                                 Placement::shuffled};
void replay_placements(const CaseInstance& target, const ExecutionResult& reference, Rebuild& rb,
                       ReplayReport& rep, const std::function<void(const std::string&)>& say) {
  for (std::size_t i = 0; i < kPlacements.size(); ++i) {
    const Placement p = kPlacements[i];
    const ExecutionResult r = rb.fresh(target, static_cast<int>(kPlacements.size() - 1 - i), {}, p);
    PlacementReplay row{p, std::string(status_name(r.status))};
    if (completed(r)) {
      if (const auto m = check_symmetric_layout(captures_of(r))) row.layout = m->describe();
      if (const auto d = compare(reference, r)) row.outputs = d->describe();
    }
    say(fmt::format("placement {}: {}; layout {}; outputs {}", placement_name(p), row.status,
                    row.layout.empty() ? "agrees across ranks" : "differs: " + row.layout,
                    row.outputs.empty() ? "as under the run's policy" : "change: " + row.outputs));
    rep.placements.push_back(std::move(row));
  }
}

// --collectives, or the record's transport where this machine can take it: a record staged
// through Gloo is replayed staged even on a GPU per rank; one through NCCL takes NCCL where
// every rank has a GPU here, else it is staged (say_transport says so).
CollectivesRequest replay_collectives(const ReplayOptions& o, const RecordedExecution* recorded) {
  if (o.shared.run.collectives) return *o.shared.run.collectives;
  const bool staged = recorded && recorded->result.collectives == kCollectivesGlooStaged;
  return staged ? CollectivesRequest::gloo : CollectivesRequest::automatic;
}

// Before the replays: where this machine's ranks share a GPU, and when the record's collectives
// took another transport than these replays will (a record with a GPU per rank replayed on one),
// so that outputs are compared with the record only within one transport (analysis/verdict.h).
void say_transport(const ReplayOptions& o, const RecordedRun& run, int world_size,
                   const RecordedExecution* recorded,
                   const std::function<void(const std::string&)>& say) {
  const LauncherKind launcher = o.launch ? o.launch->kind : run.launch.kind;
  if (run.backend != BackendKind::cuda || launcher != LauncherKind::local) return;
  const int gpus = visible_gpus();
  if (const std::string line = sharing_line(world_size, gpus, o.shared.run.requested());
      !line.empty()) {
    say(line);
  }
  const std::string now(
      transport_name(local_transport(world_size, gpus, o.shared.run.requested())));
  const std::string then = recorded ? recorded->result.collectives : std::string();
  if (!then.empty() && then != now) {
    say(
        fmt::format("the record's collectives went through {}, these replays' go through {}: "
                    "outputs that differ by reduction order are not compared with the record",
                    then, now));
  }
}

using Say = std::function<void(const std::string&)>;

// What the store holds of the case to replay: its run, its executions (with logs) and, for its
// pooled execution, the cases that ran before it in its world.
struct Record {
  RecordedRun run;
  std::vector<RecordedExecution> execs;
  std::vector<RecordedCase> preds;
  const RecordedExecution* fresh() const { return first_of(execs, Mode::fresh); }
  const RecordedExecution* pool() const { return first_of(execs, Mode::pool); }
  const RecordedExecution* either() const { return fresh() ? fresh() : pool(); }
};

Record read_record(const ReplayOptions& o, ReplayReport& rep) {
  const RecordReader reader(o.db);
  rep.recorded = reader.find_case(o.case_id);
  rep.label = rep.recorded.instance.label();
  Record r{reader.run(rep.recorded.run_id),
           reader.executions(o.case_id, RecordReader::Detail::logs),
           {}};
  if (const RecordedExecution* f = r.fresh()) rep.recorded_fresh = f->result.status;
  if (const RecordedExecution* p = r.pool()) {
    rep.recorded_pool = p->result.status;
    r.preds = reader.predecessors(*p);
  }
  rep.predecessors = r.preds.size();
  return r;
}

// The replays --mode asks for: the case alone in a fresh world, and after its recorded
// predecessors in one world; the first of them written as --trace's timeline.
struct Replays {
  std::optional<ExecutionResult> fresh, pooled;
};

Replays run_replays(const ReplayOptions& o, const Record& record, Rebuild& rb, ReplayReport& rep,
                    const Say& say) {
  const CaseInstance& target = rep.recorded.instance;
  Replays r;
  std::string said;  // the traceback said last
  if (o.mode != "pool") {
    r.fresh = rb.fresh(target, 0);  // the replays after it hang on what it and the pooled one show
    rep.replayed_fresh = r.fresh->status;
    say("fresh replay: " + describe(*r.fresh));
    say_traceback(*r.fresh, "fresh", said, say);
  }
  if (o.mode != "fresh") {
    std::vector<const CaseInstance*> before;
    for (const RecordedCase& p : record.preds) before.push_back(&p.instance);
    r.pooled = rb.pooled(before, target);
    rep.replayed_pool = r.pooled->status;
    say(fmt::format("pooled replay after {} predecessor(s): {}", record.preds.size(),
                    describe(*r.pooled)));
    say_traceback(*r.pooled, "pooled", said, say);
  }
  if (const std::string& trace = o.shared.trace; !trace.empty()) {
    write_trace_file("--trace", trace, r.fresh ? *r.fresh : *r.pooled);
    rep.trace = trace;
    say(fmt::format("trace of the {} replay written to {}", r.fresh ? "fresh" : "pooled", trace));
  }
  return r;
}

// The findings and the verdict come from the recorded and replayed logs alone, not from the
// replays that confirm them: known first, they say which fresh replays are certain to come
// (--standby starts their worlds ahead). The race check runs on the recorded logs too, so a race
// is named even when no replay shows it; it is confirmed before the verdict is said, so the
// verdict line comes last. What is said keeps its order: race, poison, verdict, placements,
// polluters.
void judge(const Record& record, const Replays& replays, Rebuild& rb, ReplayReport& rep,
           const Say& say) {
  const CaseInstance& target = rep.recorded.instance;
  const std::optional<ExecutionResult>& fresh = replays.fresh;
  const std::optional<ExecutionResult>& pooled = replays.pooled;
  std::vector<const ExecutionResult*> all;
  for (const RecordedExecution& e : record.execs) all.push_back(&e.result);
  for (const auto* e : {&fresh, &pooled}) {
    if (*e) all.push_back(&**e);
  }
  std::deque<ExecutionResult> learned;
  learn_directions(all, learned, target, rb, rep, say);
  find_races(all, rep, say);
  CrossRankFindings cross = check_cross_rank(all);
  rep.allocation = std::move(cross.allocation);
  rep.collective_mismatch = std::move(cross.collective);
  rep.uninitialized = std::move(cross.uninitialized);
  rep.more_uninitialized = std::move(cross.more_uninitialized);
  const RecordedExecution* rf = record.fresh();
  const RecordedExecution* rp = record.pool();
  const VerdictDecision decision = decide_verdict(
      ReplayFacts{rf ? &rf->result : nullptr, rp ? &rp->result : nullptr, fresh ? &*fresh : nullptr,
                  pooled ? &*pooled : nullptr, rep.race ? &*rep.race : nullptr,
                  rep.allocation ? &*rep.allocation : nullptr,
                  rep.collective_mismatch ? &*rep.collective_mismatch : nullptr,
                  rep.uninitialized ? &*rep.uninitialized : nullptr});
  rep.verdict = decision.verdict;
  rep.first_divergence = decision.where;
  const bool placement_matters =
      rep.verdict == Verdict::allocator_order || rep.verdict == Verdict::uninitialized_read;
  const bool placements = placement_matters && fresh && completed(*fresh);
  const int placement_replays = placements ? static_cast<int>(kPlacements.size()) : 0;
  const int poison_replays = rep.uninitialized ? kPoisonReplays : 0;
  confirm_races(all, target, rb, rep, say, poison_replays + placement_replays);
  const bool candidate = rep.race && rep.race->race.candidate;
  confirm_candidates(all, target, rb, rep, say, poison_replays + placement_replays);
  Confirmations seen;
  if (rep.uninitialized) {
    seen.poison_ran = confirm_uninitialized(target, rb, rep, say, placement_replays);
    seen.poison_confirmed = rep.poison_confirmed;
  }
  seen.race_confirmed = shown(rep);
  seen.race_candidate = candidate;
  say(decision.why);
  if (auto [verdict, why] = confirmed_verdict(rep.verdict, seen); verdict != rep.verdict) {
    rep.verdict = verdict;
    say(why);
  }
  if (placements) replay_placements(target, *fresh, rb, rep, say);
  if (decision.localize_polluters) localize_leak(record.preds, target, *fresh, rb, rep, say);
}

// Says which recorded case files or worker changed since the record; refuses with --strict.
void check_code(const ReplayOptions& o, const RecordedRun& run, ReplayReport& rep, const Say& say) {
  // Another --worker was chosen on purpose: the recorded one is not what runs.
  const bool other_worker = !o.shared.worker.empty() && o.shared.worker != run.worker;
  std::vector<CodeFile> compared;
  for (const CodeFile& f : run.code) {
    if (!(other_worker && f.path == run.worker)) compared.push_back(f);
  }
  rep.code_changes = code_changes(compared, run.worker, run.id);
  if (rep.code_changes.empty()) return;
  if (o.strict) {
    CPRR_THROW_AS(UsageError,
                  "--strict: not replaying case {}: {}; record the run again, or "
                  "drop --strict to replay the code as it is now",
                  o.case_id, fmt::join(rep.code_changes, "; "));
  }
  for (const std::string& change : rep.code_changes) {
    say(
        fmt::format("warning: {}: the replay runs the code as it is now, so its verdict may "
                    "reflect the change (--strict refuses)",
                    change));
  }
}

// cpreplay --pin: the cores (this thread's, which every rank it starts inherits) or GPUs the
// recorded execution ran on.
std::optional<ScopedPin> pin_to_record(ReplayOptions& o, const RecordedExecution* recorded,
                                       const std::function<void(const std::string&)>& say) {
  if (!o.pin) return std::nullopt;
  const std::string devices = recorded != nullptr ? recorded->result.devices : "";
  if (const auto cpus = cpus_of(devices)) {
    say(fmt::format("--pin: the replays run on {}, as the record did", devices));
    return std::optional<ScopedPin>(std::in_place, *cpus);
  }
  if (const auto gpus = gpus_of(devices)) {
    say(fmt::format("--pin: the replays' ranks see {}, as the record's did", devices));
    o.pinned_gpus = *gpus;
    return std::nullopt;
  }
  say("--pin: the record says nothing of where it ran (one job, or recorded before cprecord "
      "--jobs placed worlds): the replays are not pinned");
  return std::nullopt;
}

// Where the replays' MASTER_PORT is not the record's: the record's was in use on this host, or
// its fresh and pooled executions ran in two jobs with a port each, and one port serves both.
void say_master_port(const std::vector<int>& recorded, int port, const Say& say) {
  if (recorded.empty()) return;
  if (std::find(recorded.begin(), recorded.end(), port) == recorded.end()) {
    say(fmt::format("the replays' MASTER_PORT is {}: the record's ({}) is in use on this host",
                    port, fmt::join(recorded, ", ")));
  } else if (recorded.size() == 2 && recorded[0] != recorded[1]) {
    say(
        fmt::format("the record's fresh and pooled executions had MASTER_PORTs {} and {} (two "
                    "jobs); the replays all use {}",
                    recorded[0], recorded[1], port));
  }
}

}  // namespace

ReplayReport replay_case(const ReplayOptions& o, ReplayProgress progress, void* user) {
  if (o.mode != "fresh" && o.mode != "pool" && o.mode != "both") {
    CPRR_THROW_AS(UsageError, "--mode {}: use fresh, pool or both", o.mode);
  }
  ReplayReport rep;
  const Record record = read_record(o, rep);
  const Say say = [&](const std::string& line) {
    rep.log.push_back(line);
    if (progress != nullptr) progress(line, user);
  };
  ReplayOptions as_asked = o;
  as_asked.shared.run.collectives = replay_collectives(o, record.either());
  const std::optional<ScopedPin> pinned = pin_to_record(as_asked, record.either(), say);
  std::vector<int> recorded_ports;
  for (const RecordedExecution* e : {record.fresh(), record.pool()})
    if (e != nullptr && e->result.master_port > 0) recorded_ports.push_back(e->result.master_port);
  Rebuild rb(as_asked, record.run, recorded_ports, rep);
  say_master_port(recorded_ports, rb.master_port(), say);
  const CaseInstance& target = rep.recorded.instance;
  std::vector<const CaseInstance*> needed{&target};
  for (const RecordedCase& p : record.preds) needed.push_back(&p.instance);
  check_code(o, record.run, rep, say);
  rb.require_cases(needed, record.run);
  say_transport(as_asked, record.run, target.world_size, record.either(), say);
  judge(record, run_replays(o, record, rb, rep, say), rb, rep, say);
  return rep;
}

int ReplayReport::exit_code() const {
  if (verdict != Verdict::reproduced) return 1;
  const std::optional<ExecStatus>& s = replayed_pool ? replayed_pool : replayed_fresh;
  return s && meets(*s, recorded.instance.info.options.expect) ? 0 : 1;
}

}  // namespace cprr

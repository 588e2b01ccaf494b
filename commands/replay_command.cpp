#include "commands/replay_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/cli_options.h"
#include "cli/report.h"
#include "recorder/engine/controller.h"
#include "recorder/engine/world.h"
#include "recorder/launch/interrupt.h"
#include "replayer/replay.h"
#include "replayer/replay_all.h"
#include "replayer/replay_list.h"
#include "runtime/atomic_file.h"
#include "runtime/error.h"

namespace cprr {
namespace {

nlohmann::json status_json(const std::optional<ExecStatus>& s) {
  return s ? nlohmann::json(std::string(status_name(*s))) : nlohmann::json();
}

nlohmann::json divergence_json(const std::optional<Divergence>& d) {
  if (!d) return nullptr;
  nlohmann::json j{{"rank", d->rank},
                   {"kind", d->kind},
                   {"name", d->name},
                   {"seq", d->seq},
                   {"reason", d->reason},
                   {"chunk", d->chunk},
                   {"byte_range", {d->byte_begin, d->byte_end}},
                   {"element_range", {d->elem_begin, d->elem_end}},
                   {"dtype", dtype_name(d->dtype)},
                   {"expected", d->expected},
                   {"actual", d->actual},
                   {"detail", d->describe()}};
  j["element"] = d->element ? nlohmann::json(*d->element) : nlohmann::json();
  return j;
}

nlohmann::json confirmation_json(const std::optional<RaceConfirmation>& c) {
  if (!c) return nullptr;
  nlohmann::json edge;
  if (c->sync_edge) edge = {{"rank", c->sync_edge->rank}, {"after_op", c->sync_edge->seq}};
  return {{"confirmed_by", c->confirmed_by},
          {"replays", c->replays},
          {"seeds_run", c->seeds_run},
          {"amplifying_seed",
           c->amplifying_seed ? nlohmann::json(*c->amplifying_seed) : nlohmann::json()},
          {"sync_edge", std::move(edge)},
          {"sync_agrees", c->sync_agrees}};
}

void print_replay_json(std::ostream& out, const ReplayReport& r, const std::string& mode) {
  nlohmann::json polluters = nlohmann::json::array(), labels = nlohmann::json::array();
  for (const RecordedCase& p : r.polluters) {
    polluters.push_back(p.id);
    labels.push_back(p.instance.label());
  }
  nlohmann::json doc{
      {"tool", "cpreplay"},
      {"case", r.recorded.id},
      {"run", r.recorded.run_id},
      {"name", r.recorded.instance.info.name},
      {"label", r.label},
      {"mode", mode},
      {"verdict", verdict_name(r.verdict)},
      {"polluters", std::move(polluters)},
      {"polluter_labels", std::move(labels)},
      {"first_divergence", divergence_json(r.first_divergence)},
      {"race", r.race ? race_json(*r.race, r.confirmation ? r.confirmation->confirmed_by
                                                          : std::vector<std::string>{})
                      : nlohmann::json()},
      {"race_notes", r.race_notes},
      // What the probe replay learned of ops handed buffers with no direction, one line each.
      {"learned", r.learned},
      // The order the recorded runs took, when applying the fix showed it ("" otherwise).
      {"race_order", r.confirmation && r.race ? r.confirmation->recorded_order : std::string()},
      {"placements",
       [&] {
         nlohmann::json rows = nlohmann::json::array();
         for (const PlacementReplay& p : r.placements) {
           rows.push_back({{"placement", placement_name(p.placement)},
                           {"status", p.status},
                           {"layout", p.layout.empty() ? nlohmann::json() : nlohmann::json(p.layout)},
                           {"outputs_change", p.outputs.empty() ? nlohmann::json()
                                                                : nlohmann::json(p.outputs)}});
         }
         return rows;
       }()},
      {"allocation", r.allocation ? allocation_json(*r.allocation) : nlohmann::json()},
      {"collective_mismatch",
       r.collective_mismatch ? collective_json(*r.collective_mismatch) : nlohmann::json()},
      {"uninitialized_read",
       r.uninitialized ? [&] {
         nlohmann::json j = uninitialized_json(*r.uninitialized, r.more_uninitialized);
         j["confirmed_by"] = r.poison_confirmed ? nlohmann::json::array({"poison"})
                                                : nlohmann::json::array();
         j["poison_replays"] = r.poison_replays;
         return j;
       }()
                       : nlohmann::json()},
      {"confirmation", confirmation_json(r.confirmation)},
      {"predecessors", r.predecessors},
      {"trace", r.trace.empty() ? nlohmann::json() : nlohmann::json(r.trace)},
      {"replays", r.replays},
      {"ddmin_replays", r.ddmin_replays},
      {"recorded",
       {{"fresh", status_json(r.recorded_fresh)}, {"pool", status_json(r.recorded_pool)}}},
      {"replayed",
       {{"fresh", status_json(r.replayed_fresh)}, {"pool", status_json(r.replayed_pool)}}},
      {"log", r.log},
      {"code_changes", r.code_changes},
      {"exit_code", r.exit_code()}};
  out << doc.dump(2) << '\n';
}

void print_replay_text(std::ostream& out, const ReplayReport& r) {
  out << fmt::format("case {} {} (run {}): {}\n", r.recorded.id, r.label, r.recorded.run_id,
                     verdict_name(r.verdict));
  for (const std::string& change : r.code_changes) {
    out << "  replayed other code: " << change << '\n';
  }
  if (r.allocation) out << "  allocation: " << r.allocation->mismatch.describe() << '\n';
  if (r.collective_mismatch) {
    out << "  collective: " << r.collective_mismatch->mismatch.describe() << '\n';
  }
  for (const PlacementReplay& p : r.placements) {
    out << fmt::format("  placement {}: layout {}, outputs {}\n", placement_name(p.placement),
                       p.layout.empty() ? "agrees" : "differs",
                       p.outputs.empty() ? "same" : "change");
  }
  if (r.uninitialized) {
    out << "  uninitialized: " << r.uninitialized->mismatch.describe()
        << (r.poison_confirmed ? "; confirmed by poisoning new allocations" : "") << '\n';
  }
  if (r.race) {
    out << "  race: " << describe_race(*r.race) << '\n';
    out << "  fix: " << describe_fix(r.race->race) << '\n';
    // Every race of the execution, as the record-time table lists them.
    for (const RaceFinding& other : r.race->others) {
      out << "  also: " << describe_other_race(other) << '\n';
    }
  }
  for (const std::string& line : r.learned) out << "  learned: " << line << '\n';
  // What weakened the race check, and a race candidate no replay showed (then r.race is empty).
  for (const std::string& note : r.race_notes) out << "  race note: " << note << '\n';
  if (r.confirmation && r.race) {
    const RaceConfirmation& c = *r.confirmation;
    std::string by;
    for (const std::string& check : c.confirmed_by) by += (by.empty() ? "" : ", ") + check;
    out << fmt::format("  confirmed by: {} ({} replay(s))\n",
                       by.empty() ? "no dynamic check (the race is in the op log only)" : by,
                       c.replays);
    if (!c.recorded_order.empty()) out << "  order: " << c.recorded_order << '\n';
    if (c.sync_edge) {
      out << fmt::format(
          "  sync bisection: the host must synchronize after op #{} of rank {}{}\n",
          c.sync_edge->seq, c.sync_edge->rank,
          c.sync_agrees ? ", between the race's two ops" : " (not between the race's ops)");
    }
  }
  if (r.first_divergence) out << "  where: " << r.first_divergence->describe() << '\n';
  if (!r.polluters.empty()) {
    out << fmt::format("  polluted by {} of {} predecessor(s):\n", r.polluters.size(),
                       r.predecessors);
    for (const RecordedCase& p : r.polluters) {
      out << fmt::format("    case {} {}\n", p.id, p.instance.label());
    }
  }
  out << fmt::format("  {} replay(s), {} of them delta debugging\n", r.replays, r.ddmin_replays);
}

// cpreplay's options, in the order --help lists them. Returns --case, which the caller reads
// back into options.case_id.
CLI::Option* add_replay_options(CLI::App& app, ReplayCommandOptions& o, int64_t& case_id,
                                LaunchFlags& launch) {
  add_common_flags(app, "cpreplay");
  ReplayOptions& r = o.replay;
  app.add_option("--db", r.db, "database written by cprecord");
  auto* list = app.add_flag("--list", o.list, "list the runs and cases in the database");
  auto* cas = app.add_option("--case", case_id, "replay the case with this id (see --list)");
  list->excludes(cas);
  auto* all = app.add_flag("--all", o.all,
                           "triage a run: replay every case that failed, diverged or got a verdict "
                           "when recorded, one row each (verdict, expected verdict, where, "
                           "replays)");
  all->excludes(list)->excludes(cas);
  app.add_option("--run", o.run_id, "with --all: the run to triage (default: the latest)")
      ->needs(all);
  app.add_option("--max-replays", o.max_replays,
                 "with --all: no further case starts once this many replays ran")
      ->needs(all)
      ->check(CLI::PositiveNumber);
  app.add_option("--mode", r.mode,
                 "fresh: replay alone in a new world; pool: after its recorded predecessors; "
                 "both: both, and delta-debug the predecessors when they differ (default)")
      ->check(CLI::IsMember({"fresh", "pool", "both"}));
  add_worker_option(app, r.shared.worker, "(default: the one recorded in the run)");
  app.add_flag("--pin", r.pin,
               "replay on the cores or GPUs the recorded execution ran on (cprecord --jobs "
               "records them): a result that depends on one device shows again there");
  app.add_flag("--strict", r.strict,
               "refuse to replay (exit 2) when a case file or the worker changed since the run "
               "was recorded; without it the replay says so and goes on")
      ->excludes(list);
  add_timeout_option(app, r.shared.run.timeout_override_s);
  add_trace_option(app, r.shared.trace, "FILE",
                   "the first replay (fresh, else pooled) of --case to FILE")
      ->needs(cas);
  app.add_flag("--json", o.json, "print one JSON document on stdout and nothing else there");
  add_standby_option(app, r.shared.run.standby,
                     "fresh replays known to come (a race's confirmation, the poison and "
                     "placement replays; within one case)");
  add_collectives_option(app, r.shared.run.collectives,
                         "as the record's (a record staged through Gloo is replayed staged, "
                         "else auto)");
  add_launch_options(app, launch);
  return cas;
}

// What --help says after the options: how ranks start, the verdicts, Ctrl-C, exit codes.
std::string replay_footer() {
  return "Ranks start the way the recorded run started them (its --launcher and options) unless "
         "--launcher is given here; a Python run's ranks are forked from a process that imported "
         "torch and the case files once (CPRR_PYTHON_TEMPLATE=off in the environment starts each "
         "rank afresh).\n"
         "Verdicts: reproduced, state_leak (with polluters), collective_mismatch (ranks that "
         "called a collective differently), allocator_order (a symmetric layout that differs "
         "across ranks), uninitialized_read (a read of bytes nothing wrote, confirmed by "
         "poisoning new allocations), stream_race (with the racing op pair, buffer and fix, "
         "confirmed by serialization, the fix applied (the second op held until the first "
         "completed; it names the order the recorded runs took), amplification with seeded "
         "delays and sync bisection), "
         "nondeterministic, crash, hang.\n"
         "Ctrl-C (or SIGTERM/SIGHUP) stops the replay, its ranks killed; the exit code is then "
         "128 + the signal.\n"
         "Exit codes: 0 the case reproduced and met its expectation (--all: every triaged case "
         "got its expected verdict: a seeded bug its own, a fault fixture its crash or hang, any "
         "other case reproduced); 1 otherwise; 2 bad usage, an unreadable database or an "
         "infrastructure error.";
}

}  // namespace

int run_replay(const ReplayCommandOptions& o, std::ostream& out, std::ostream& err, bool progress) {
  if (int{o.list} + int{o.all} + int{o.case_id.has_value()} != 1) {
    CPRR_THROW_AS(UsageError, "give exactly one of --list, --all and --case ID");
  }
  if (o.list) {
    list_db(out, o.replay.db, o.json);
    return 0;
  }
  // A launcher given here, before anything runs; the run's own once the replay reads it.
  check_shared(o.replay.shared);
  if (!o.replay.shared.trace.empty()) {
    if (!o.case_id) CPRR_THROW_AS(UsageError, "--trace FILE goes with --case ID");
    check_file_target("--trace", o.replay.shared.trace);  // before the replays, not after
  }
  ReplayOptions ro = o.replay;
  ro.case_id = o.case_id.value_or(0);
  ro.shared.run.fork_from_template = python_template_from_env();
  auto echo = [](const std::string& line, void* user) {
    *static_cast<std::ostream*>(user) << "cpreplay: " << line << '\n' << std::flush;
  };
  if (o.all) {
    const Triage t =
        triage_run(TriageOptions{ro, o.run_id, o.max_replays}, progress ? +echo : nullptr, &err);
    if (o.json) {
      print_triage_json(out, t);
    } else {
      print_triage_text(out, t);
    }
    return t.exit_code();
  }
  const ReplayReport r = replay_case(ro, progress ? +echo : nullptr, &err);
  if (o.json) {
    print_replay_json(out, r, ro.mode);
  } else {
    print_replay_text(out, r);
  }
  return r.exit_code();
}

int replay_main(int argc, char** argv) {
  ReplayCommandOptions o;
  int64_t case_id = 0;
  CLI::App app{
      "cpreplay: rebuild a recorded case exactly, re-run it fresh and/or pooled, and say "
      "which kind of bug it is and where."};
  LaunchFlags launch;
  const CLI::Option* cas = add_replay_options(app, o, case_id, launch);
  app.footer(replay_footer());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*cas) o.case_id = case_id;
  std::optional<InterruptWatch> interrupt;
  try {
    interrupt.emplace();
    o.replay.shared.interrupt = &*interrupt;
    // Given any launcher option, they replace the recorded launcher (and are checked as in
    // cprecord: --hosts without --launcher is refused, not ignored).
    const bool any_launch = launch.launcher_given->count() > 0 ||
                            std::any_of(launch.others.begin(), launch.others.end(),
                                        [](const CLI::Option* opt) { return opt->count() > 0; });
    if (any_launch) o.replay.launch = finish_launch_options(launch);
    return run_replay(o, std::cout, std::cerr, ::isatty(STDERR_FILENO) != 0 || !o.json);
  } catch (const Interrupted& e) {
    std::cerr << "cpreplay: " << e.what() << " by SIG" << sigabbrev_np(interrupt->signal())
              << "; no verdict\n";
    return 128 + interrupt->signal();
  } catch (const std::exception& e) {
    std::cerr << "cpreplay: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace cprr

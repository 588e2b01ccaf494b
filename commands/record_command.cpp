#include "commands/record_command.h"

#include <fmt/ranges.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <deque>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "cli/cli_options.h"
#include "cli/code_files.h"
#include "cli/junit.h"
#include "cli/report.h"
#include "cli/report_table.h"
#include "cli/trace.h"
#include "commands/merge_command.h"
#include "commands/record_run.h"
#include "recorder/engine/controller.h"
#include "recorder/engine/interrupt.h"
#include "recorder/engine/job_slots.h"
#include "recorder/engine/launcher.h"
#include "recorder/engine/transport_choice.h"
#include "recorder/launch/port_claim.h"
#include "runtime/atomic_file.h"
#include "runtime/backend.h"
#include "runtime/error.h"
#include "schema/record_queue.h"
#include "schema/record_reader.h"
#include "schema/record_writer.h"

namespace cprr {
namespace {

bool is_module_name(const std::string& text) {
  static const std::regex kModule(R"([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)");
  return std::regex_match(text, kModule);
}

// The Python worker's own arguments for --python's items: a path (file or directory) becomes
// absolute, so cpreplay finds it from any directory; anything else must read as a module name.
std::vector<std::string> python_worker_args(const std::vector<std::string>& items) {
  std::vector<std::string> args;
  for (const std::string& item : items) {
    std::error_code ec;
    if (std::filesystem::exists(item, ec)) {
      args.push_back("--cases");
      args.push_back(std::filesystem::absolute(item).lexically_normal().string());
    } else if (is_module_name(item)) {
      args.push_back("--cases");
      args.push_back(item);
    } else {
      CPRR_THROW_AS(UsageError,
                    "--python {}: no such file or directory, and not a module name; pass test "
                    "files, directories of them or importable module names",
                    item);
    }
  }
  return args;
}

// What the Python worker was given, as the command line said it: "--python a.py --pytest t/".
std::string python_sources(const RecordOptions& o) {
  std::vector<std::string> parts;
  if (!o.python.empty()) parts.push_back(fmt::format("--python {}", fmt::join(o.python, " ")));
  if (!o.torchrun.empty()) parts.push_back("--torchrun " + o.torchrun);
  if (!o.torchrun_module.empty()) parts.push_back("--torchrun-module " + o.torchrun_module);
  if (!o.pytest.empty()) parts.push_back(fmt::format("--pytest {}", fmt::join(o.pytest, " ")));
  return fmt::format("{}", fmt::join(parts, " "));
}

// The Python worker's --script for --torchrun / --torchrun-module (cprr.suites.scripts.from_spec).
std::vector<std::string> script_worker_args(const RecordOptions& o) {
  const bool script = !o.torchrun.empty() || !o.torchrun_module.empty();
  if (!o.script_args.empty() && script == !o.pytest.empty()) {
    CPRR_THROW_AS(UsageError,
                  "'{}': the arguments after -- are a script's or pytest's: give --torchrun "
                  "SCRIPT, --torchrun-module MODULE or --pytest PATH (one of them)",
                  fmt::join(o.script_args, " "));
  }
  if (!script) return {};
  if (!o.torchrun.empty() && !o.torchrun_module.empty()) {
    CPRR_THROW_AS(UsageError, "--torchrun {} and --torchrun-module {}: give one of them",
                  o.torchrun, o.torchrun_module);
  }
  nlohmann::json spec{{"world_sizes", o.nproc_per_node}, {"argv", o.script_args}};
  if (!o.torchrun.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(o.torchrun, ec)) {
      CPRR_THROW_AS(UsageError, "--torchrun {}: no such script; pass the path of a Python file",
                    o.torchrun);
    }
    spec["path"] = std::filesystem::absolute(o.torchrun).lexically_normal().string();
  } else if (is_module_name(o.torchrun_module)) {
    spec["module"] = o.torchrun_module;
  } else {
    CPRR_THROW_AS(UsageError, "--torchrun-module {}: not a module name (as python -m takes one)",
                  o.torchrun_module);
  }
  return {"--script", spec.dump()};
}

// The Python worker's --pytest for --pytest's paths (cprr.suites.pytest_items.within_session): each
// a file, a directory or a node id (FILE::Class::test), made absolute.
std::vector<std::string> pytest_worker_args(const RecordOptions& o) {
  if (o.pytest.empty()) return {};
  std::vector<std::string> paths;
  for (const std::string& given : o.pytest) {
    const std::size_t node = given.find("::");
    const std::string path = given.substr(0, node);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      CPRR_THROW_AS(UsageError,
                    "--pytest {}: no such file or directory; pass test files, directories or "
                    "node ids (FILE::Class::test)",
                    given);
    }
    paths.push_back(std::filesystem::absolute(path).lexically_normal().string() +
                    (node == std::string::npos ? "" : given.substr(node)));
  }
  const nlohmann::json spec{
      {"paths", paths}, {"args", o.script_args}, {"world_sizes", o.nproc_per_node}};
  return {"--pytest", spec.dump()};
}

std::optional<std::regex> compile_regex(const char* option, const std::string& text) {
  if (text.empty()) return std::nullopt;
  try {
    return std::regex(text, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    CPRR_THROW_AS(UsageError, "{} '{}' is not a valid regular expression: {}", option, text,
                  e.what());
  }
}

// --rerun-failed: the labels of the cases the latest run of `db` judged not as expected.
std::set<std::string> failed_in_latest_run(const std::string& db) {
  if (!std::filesystem::exists(db)) {
    CPRR_THROW_AS(UsageError, "--rerun-failed: {} does not exist; record a run into it first", db);
  }
  const RecordReader reader(db);
  const RecordedRun latest = reader.latest_run("--rerun-failed");  // a merged run's shards too
  if (!latest.finished_at) {
    CPRR_THROW_AS(UsageError,
                  "--rerun-failed: run {} of {} never finished, so its cases were not judged; "
                  "run it again without --rerun-failed",
                  latest.id, db);
  }
  std::set<std::string> labels;
  for (const RecordedCase& c : reader.cases()) {
    if (c.run_id == latest.id && c.judgement && !c.judgement->as_expected) {
      labels.insert(c.instance.label());
    }
  }
  return labels;
}

// --by-time DB: each case's recorded time in the latest run of DB (a merged run's too), summed
// over its executions.
std::map<std::string, double> recorded_wall_ms(const std::string& db) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(db, ec)) {
    CPRR_THROW_AS(UsageError,
                  "--by-time {}: no such file; give the database of an earlier run of the plan "
                  "(cprecord --merge makes one of a sharded run)",
                  db);
  }
  // An earlier run's database, maybe a CI artifact in a read-only folder: read as finished.
  const RecordReader reader(db, "--by-time", Database::Mode::read_finished);
  return reader.case_wall_ms(reader.latest_run("--by-time").id);
}

Selection selection_of(const RecordOptions& o) {
  Selection s{compile_regex("--exclude", o.exclude), {}};
  if (!o.shard.empty()) {
    const std::optional<Shard> shard = parse_shard(o.shard);
    if (!shard) {
      CPRR_THROW_AS(UsageError,
                    "--shard {}: use I/N with 1 <= I <= N, e.g. --shard 2/4 for the second of "
                    "four CI jobs",
                    o.shard);
    }
    s.shard = *shard;
    s.shard.by_time = !o.by_time.empty();
  } else if (!o.by_time.empty()) {
    CPRR_THROW_AS(UsageError,
                  "--by-time {}: it splits the plan for --shard; give --shard I/N with it",
                  o.by_time);
  }
  return s;
}

void check_worker(const std::string& worker, bool python) {
  if (::access(worker.c_str(), X_OK) != 0) {
    CPRR_THROW_AS(UsageError, "--worker {}: not an executable file; {}", worker,
                  python ? "cprr-pyworker is built when CMake finds Python 3 and pybind11 "
                           "(Debian: python3-dev, pybind11-dev; see README.md)"
                         : "build it (cmake --build build) or pass the path of your worker binary");
  }
}

// --list: the plan. Nothing is recorded, so there are no case ids yet: the numbers are plan
// positions, and a recorded run prints the ids cpreplay --case takes.
void print_plan(std::ostream& out, const std::vector<CaseInstance>& plan, bool json) {
  if (json) {
    nlohmann::json cases = nlohmann::json::array();
    for (const CaseInstance& inst : plan) cases.push_back(instance_json(inst));
    out << nlohmann::json{{"tool", "cprecord"},
                          {"version", CPRR_VERSION},
                          {"plan", std::move(cases)}}
               .dump(2)
        << '\n';
    return;
  }
  for (const CaseInstance& inst : plan) {
    out << fmt::format("plan {:>4}  {}  expect={}\n", inst.id, inst.label(),
                       expect_name(inst.info.options.expect));
  }
}

// The checks CLI11's validators make, repeated for in-process callers of run_record.
void check_counts(const RecordOptions& o) {
  if (o.repeat < 1) {
    CPRR_THROW_AS(UsageError, "--repeat {}: must be a whole number from 1 to 1000000", o.repeat);
  }
  check_shared(o.shared, o.launch.kind);
}

std::vector<Mode> modes_of(const std::string& mode) {
  if (mode == "pool") return {Mode::pool};
  if (mode == "fresh") return {Mode::fresh};
  if (mode == "both") return {Mode::fresh, Mode::pool};
  CPRR_THROW_AS(UsageError, "--mode {}: use pool, fresh or both", mode);
}

// --shuffle's seed: the one given, or a fresh one for a bare --shuffle.
std::optional<uint64_t> shuffle_seed_of(const std::optional<std::string>& shuffle) {
  if (!shuffle) return std::nullopt;
  if (*shuffle == "random" || shuffle->empty()) {
    std::random_device rd;
    return ((uint64_t{rd()} << 32) ^ rd()) & kMaxSeed;
  }
  const std::optional<uint64_t> seed = parse_shuffle_seed(*shuffle);
  if (!seed) {
    CPRR_THROW_AS(UsageError,
                  "--shuffle={}: the seed must be a whole number from 0 to {} (or give --shuffle "
                  "alone for a fresh one)",
                  *shuffle, kMaxSeed);
  }
  return seed;
}

std::string absolute(const std::string& path) {
  std::error_code ec;
  const auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.string();
}

// The judgement as the store keeps it on each case row, so a query needs no join over executions.
std::vector<CaseJudgement> judgements_of(const std::vector<CaseOutcome>& outcomes) {
  std::vector<CaseJudgement> out;
  for (const CaseOutcome& o : outcomes) {
    CaseJudgement j;
    j.case_id = o.case_id;
    if (o.verdict) j.verdict = std::string(verdict_name(*o.verdict));
    j.as_expected = o.as_expected;
    if (o.differential) j.fresh_vs_pool = o.differential->describe();
    out.push_back(std::move(j));
  }
  return out;
}

// The run's last rows: every case's judgement (none when a signal cut the run short: a case
// stopped after its fresh half would look complete), then the exit code that finishes it, which
// for an interrupted run is the shell's 128 + signal. Returns that code.
int close_run(RecordWriter& writer, const std::vector<CaseOutcome>& outcomes, int signal,
              const std::optional<std::string>& stopped, std::size_t ran, std::size_t planned,
              std::ostream& err) {
  const int code = signal != 0 ? 128 + signal : exit_code_for(outcomes);
  if (signal == 0) writer.judge_cases(judgements_of(outcomes));
  writer.finish(code, signal == 0 ? stopped : std::nullopt);
  if (signal == 0 && stopped) {
    err << fmt::format(
        "cprecord: stopped by {} after {} of {} executions; run {} is recorded "
        "as stopped there\n",
        *stopped, ran, planned, writer.run_id());
  }
  if (signal != 0) {
    err << fmt::format(
        "cprecord: interrupted by SIG{} after {} of {} executions; run {} is "
        "recorded with exit code {}\n",
        sigabbrev_np(signal), ran, planned, writer.run_id(), code);
  }
  return code;
}

// --trace DIR: the directory must exist or be creatable before the run spends anything.
void prepare_trace_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    CPRR_THROW_AS(UsageError, "--trace {}: cannot make this directory: {}", dir,
                  ec ? ec.message() : "a file of that name exists");
  }
  check_file_target("--trace", (std::filesystem::path(dir) / "case-0-fresh-1.json").string());
}

// The executions worth a timeline: every one of each case with a verdict or not as expected.
// Returns how many trace files were written.
std::size_t write_traces(const std::string& dir, const std::vector<CaseOutcome>& outcomes) {
  std::size_t written = 0;
  for (const CaseOutcome& o : outcomes) {
    if (o.as_expected && !o.verdict) continue;
    for (const ExecutionResult* e : o.executions) {
      if (!has_timeline(*e)) continue;
      const std::string name =
          fmt::format("case-{}-{}-{}.json", o.case_id, mode_name(e->mode), e->attempt);
      write_trace_file("--trace", (std::filesystem::path(dir) / name).string(), *e);
      ++written;
    }
  }
  return written;
}

// One line per world size whose ranks share GPUs (or --collectives gloo), before the run: the
// transport every execution then records is no surprise; --collectives nccl where they would
// share is refused here, not world by world. Only the local launcher's worlds are
// known here (a launcher's ranks see their own node's GPUs).
void say_gpu_sharing(const std::vector<CaseInstance>& plan, const RecordOptions& o, int gpus,
                     std::ostream& err) {
  if (o.launch.kind != LauncherKind::local) return;
  const CollectivesRequest collectives = o.shared.run.requested();
  std::set<int> sizes;
  for (const CaseInstance& c : plan) sizes.insert(c.world_size);
  for (int w : sizes) check_nccl_fits(collectives, w, gpus);  // before any line is said
  for (int w : sizes) {
    if (const std::string line = sharing_line(w, gpus, collectives); !line.empty()) {
      err << "cprecord: " << line << '\n';
    }
  }
}

// What run_record resolves from its options before anything runs, every check made in the
// order a user meets them.
struct RecordSetup {
  std::string worker;
  std::vector<std::string> worker_args;
  /// The code the cases come from (run.code): the case files the catalog names, or the worker.
  std::vector<std::string> code;
  std::string backend;
  std::vector<Mode> modes;
  std::optional<std::regex> filter;
  Selection selection;
  std::optional<uint64_t> shuffle_seed;
  Placement placement = Placement::best_fit;
  std::string plan_hash;  ///< of the plan before --shard (run.plan_hash)
};

RecordSetup resolve(const RecordOptions& o) {
  RecordSetup s;
  s.worker_args = python_worker_args(o.python);
  for (std::string& arg : script_worker_args(o)) s.worker_args.push_back(std::move(arg));
  for (std::string& arg : pytest_worker_args(o)) s.worker_args.push_back(std::move(arg));
  const bool python = !s.worker_args.empty();
  s.worker =
      absolute(!o.shared.worker.empty() ? o.shared.worker
                                        : beside_self(python ? "cprr-pyworker" : "cpworker"));
  check_worker(s.worker, python);
  s.backend = resolve_backend(o.backend);
  check_collectives(o.shared.run.requested(), s.backend);
  s.modes = modes_of(o.mode);
  check_counts(o);
  s.filter = compile_regex("--filter", o.filter);
  s.selection = selection_of(o);
  s.shuffle_seed = shuffle_seed_of(o.shuffle);
  const std::optional<Placement> placement = parse_placement(o.placement);
  if (!placement) {
    CPRR_THROW_AS(UsageError, "--placement {}: use best_fit, counter, never_reuse or shuffled",
                  o.placement);
  }
  s.placement = *placement;
  return s;
}

// The cases to run: the worker's catalog as --filter, --exclude, --shard and --rerun-failed
// select it; nullopt when there is nothing to do, which is said on `err` and is no failure.
std::optional<std::vector<CaseInstance>> plan_of(const RecordOptions& o, RecordSetup& s,
                                                 std::ostream& err) {
  if (o.rerun_failed) {
    s.selection.labels = failed_in_latest_run(o.db);
    if (s.selection.labels->empty()) {
      err << fmt::format(
          "cprecord: the latest run in {} had no case that was not as expected; "
          "nothing to rerun\n",
          o.db);
      return std::nullopt;
    }
  }
  const Catalog catalog = fetch_catalog(s.worker, s.worker_args);
  if (catalog.cases.empty()) {
    // Said as what it is, not as a --filter that matched nothing.
    if (!s.worker_args.empty()) {
      CPRR_THROW_AS(UsageError,
                    "{}: no case in these files (no @cprr.case, PyTorch TestCase class, "
                    "cprr.script or pytest item)",
                    python_sources(o));
    }
    CPRR_THROW_AS(UsageError, "worker {} registers no case (CPRR_CASE)", s.worker);
  }
  s.code = s.worker_args.empty() ? std::vector<std::string>{s.worker} : catalog.files;
  const std::vector<CaseInstance> matched = expand(catalog, s.filter);
  const std::vector<CaseInstance> whole = narrow(matched, s.selection);
  s.plan_hash = plan_hash(whole, o.mode, o.repeat);
  if (!o.by_time.empty()) {
    s.selection.shard_of =
        shards_by_time(whole, recorded_wall_ms(o.by_time), s.selection.shard.count);
  }
  std::vector<CaseInstance> plan = select(matched, s.selection);
  if (plan.empty() && !o.shard.empty() && !whole.empty()) {
    // A small plan split over many CI jobs leaves some empty: that job has nothing to do, and
    // records so (an empty run), for a --merge of the shards to know this one ran.
    err << fmt::format("cprecord: shard {} holds none of the {} planned case(s); nothing to run\n",
                       o.shard, whole.size());
    return plan;
  }
  if (plan.empty()) {
    CPRR_THROW_AS(UsageError, "no case matches --filter '{}'{}; run with --list to see the cases",
                  o.filter,
                  o.exclude.empty() ? "" : fmt::format(" less --exclude '{}'", o.exclude));
  }
  return plan;
}

RunMeta run_meta(const RecordOptions& o, const RecordSetup& s,
                 const std::vector<std::string>& argv) {
  const std::string shard = o.shard.empty() ? "" : shard_text(s.selection.shard);
  return RunMeta{s.backend,
                 o.mode,
                 std::string(placement_name(s.placement)),
                 s.worker,
                 argv,
                 kProtocolVersion,
                 s.shuffle_seed,
                 o.launch,
                 s.worker_args,
                 fingerprint(s.code),
                 shard,
                 s.plan_hash};
}

ControllerConfig controller_config(const RecordOptions& o, const RecordSetup& s) {
  ControllerConfig cc;
  cc.worker = s.worker;
  cc.worker_args = s.worker_args;
  cc.backend = s.backend;
  cc.launch = o.launch;
  apply_shared(o.shared, cc);
  return cc;
}

// --jobs: the slots the machine is split into, one per job (one with everything for one job).
std::vector<JobSlot> slots_of(const RecordOptions& o, const RecordSetup& s,
                              const std::vector<CaseInstance>& plan, std::ostream& err) {
  const Machine machine = this_machine(s.backend);
  if (o.jobs < 0) CPRR_THROW_AS(UsageError, "--jobs {}: give 1 or more", o.jobs);
  int jobs = o.jobs;
  if (o.launch.kind != LauncherKind::local) {
    if (jobs > 1) {
      CPRR_THROW_AS(UsageError,
                    "--jobs {} with --launcher {}: a launcher's worlds run one at a time; run "
                    "one cprecord per allocation and merge their databases (--merge)",
                    jobs, launcher_name(o.launch.kind));
    }
    return job_slots(machine, 1);
  }
  if (jobs == 0) {
    int largest = 1;
    for (const CaseInstance& c : plan) largest = std::max(largest, c.world_size);
    jobs = default_jobs(machine, largest);
  }
  std::vector<JobSlot> slots = job_slots(machine, jobs);
  if (jobs > 1 && s.backend != "cuda" && machine.cpus.size() < static_cast<std::size_t>(jobs)) {
    // job_slots gave each job one core, in turn: say so, as the worlds' times are not their own.
    err << fmt::format(
        "cprecord: {} jobs on {} core(s): they share the cores, each job pinned to one of them "
        "in turn; worlds side by side slow each other (give --jobs {} or fewer for cores of "
        "their own)\n",
        jobs, machine.cpus.size(), machine.cpus.size());
  } else if (jobs > 1) {
    err << fmt::format("cprecord: {} jobs, each on its own {}: {}\n", jobs,
                       s.backend == "cuda" ? "GPUs" : "cores", [&] {
                         std::vector<std::string> parts;
                         for (const JobSlot& slot : slots)
                           parts.push_back(devices_text(slot, s.backend));
                         return fmt::format("{}", fmt::join(parts, "; "));
                       }());
  }
  return slots;
}

int smallest_gpu_share(const std::vector<JobSlot>& slots) {
  std::size_t least = slots.front().gpus.size();
  for (const JobSlot& slot : slots) least = std::min(least, slot.gpus.size());
  return static_cast<int>(least);
}

// Job `job` of `jobs`: its worlds on its slot alone, its ids its own, its placement recorded.
void place_job(ControllerConfig& cc, const JobSlot& slot, int job, int jobs,
               const std::string& backend) {
  pin_this_thread(slot.cpus);  // the job's thread: every rank and template it starts inherits it
  for (const auto& [key, value] : job_env(slot, backend)) set_env(cc.env, key, value);
  cc.devices = devices_text(slot, backend);
  cc.first_id = static_cast<uint64_t>(job) + 1;
  cc.id_step = static_cast<uint64_t>(jobs);
}

// A run as it ended: what run_plan executed of the plan, in the store as `writer`'s run.
struct Ran {
  const std::vector<CaseInstance>& plan;
  const std::vector<int64_t>& case_ids;
  const PlanRun& executed;
  std::chrono::steady_clock::time_point t0;
};

// The run's end: its judgements and exit code stored, then the JUnit file, the traces and the
// report (JSON or the table). Returns the exit code.
int finish_run(const RecordOptions& o, const RecordSetup& s, const Ran& ran, RecordWriter& writer,
               std::ostream& out, std::ostream& err, bool color) {
  const std::vector<ExecutionResult>& results = ran.executed.results;
  const int signal = o.shared.interrupt != nullptr ? o.shared.interrupt->signal() : 0;
  const auto outcomes = summarize(ran.plan, ran.case_ids, results);
  const std::size_t planned = ran.plan.size() * s.modes.size() * static_cast<std::size_t>(o.repeat);
  const int code =
      close_run(writer, outcomes, signal, ran.executed.stopped, results.size(), planned, err);
  const RunInfo info{
      writer.run_id(),
      absolute(o.db),
      o.db,
      s.worker,
      s.backend,
      o.mode,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - ran.t0).count(),
      code,
      ran.executed.stopped,
      s.shuffle_seed,
      describe(o.launch),
      signal};
  if (!o.junit.empty()) write_junit_file(o.junit, outcomes, results, info);
  const std::string& trace_dir = o.shared.trace;
  if (!trace_dir.empty()) {
    const std::size_t traces = write_traces(trace_dir, outcomes);
    err << (traces == 0 ? fmt::format("cprecord: no trace written to {}: every case was as "
                                      "expected with no finding (cpreplay --case N --trace FILE "
                                      "draws any case)\n",
                                      trace_dir)
                        : fmt::format("cprecord: wrote {} trace(s) to {} (open them in "
                                      "https://ui.perfetto.dev or chrome://tracing)\n",
                                      traces, trace_dir));
  }
  if (o.json) {
    print_json(out, outcomes, info);
  } else {
    print_table(out, results, outcomes, info, color);
  }
  return code;
}

// cprecord's options, in the order --help lists them.
void add_record_options(CLI::App& app, RecordOptions& o, LaunchFlags& launch) {
  add_common_flags(app, "cprecord");
  add_worker_option(app, o.shared.worker,
                    "holding the cases (default: cpworker next to cprecord; with --python, "
                    "cprr-pyworker next to it)");
  app.add_option("--python", o.python,
                 "run Python cases (@cprr.case) instead of a worker binary's: test files, "
                 "directories of test_*.py / *_test.py files, or module names; the ranks are "
                 "cprr-pyworker processes, forked from one that imported torch and the case "
                 "files once and ran nothing (CPRR_PYTHON_TEMPLATE=off in the environment starts "
                 "each rank afresh instead)")
      ->expected(1, -1);
  app.add_option("--torchrun", o.torchrun,
                 "run a torchrun script as cases, unchanged: each rank runs it as __main__ with "
                 "torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...), "
                 "sys.argv the script and the arguments after --, sys.path[0] its folder; its "
                 "init_process_group gets the case's group; exit status 0 passes");
  app.add_option("-m,--torchrun-module", o.torchrun_module,
                 "as --torchrun, for a module run as python -m runs it (sys.path[0] the current "
                 "folder)");
  app.add_option("--pytest", o.pytest,
                 "run pytest items as cases, each in every rank of a world (as torchrun -m "
                 "pytest or DeepSpeed's DistributedTest run them): test files, directories or "
                 "node ids; pytest collects in the rank (arguments after -- are pytest's); an "
                 "item's world sizes are its @pytest.mark.world_size(N), else its class's "
                 "world_size, else --nproc-per-node; fixtures are per rank and end with each "
                 "case, tmp_path is one folder shared by the ranks")
      ->expected(1, -1);
  app.add_option("--nproc-per-node", o.nproc_per_node,
                 "the world sizes --torchrun runs its script at (torchrun's --nproc-per-node; "
                 "several: a case each), and --pytest's items that name none")
      ->expected(1, -1)
      ->check(CLI::Range(1, 1024));
  app.add_option("script_args", o.script_args,
                 "after --: the arguments of the --torchrun script (its sys.argv[1:]), or "
                 "pytest's with --pytest");
  app.add_option("--backend", o.backend, "device backend: auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_collectives_option(app, o.shared.run.collectives, "auto");
  app.add_option("--db", o.db, "SQLite file to record into (created when missing)");
  app.add_option("--mode", o.mode,
                 "pool: one reused world per world size; fresh: a world per case; both: each case "
                 "fresh and pooled, flagging cases whose results differ")
      ->check(CLI::IsMember({"pool", "fresh", "both"}));
  app.add_option("--junit", o.junit, "also write JUnit XML (one testcase per execution) to PATH");
  app.add_option("--filter", o.filter,
                 "regex searched in each case label 'name{params}@world_size'");
  app.add_option("--exclude", o.exclude,
                 "regex: drop the cases whose label it matches (after --filter)");
  app.add_option("--shard", o.shard,
                 "I/N: run only the I-th of N stable parts of the plan (a case's part depends "
                 "on its label alone; the N parts together are the plan), e.g. one per CI job");
  app.add_option("--by-time", o.by_time,
                 "with --shard: split the plan by the case times recorded in DB's latest run "
                 "(longest first onto the least-loaded shard) instead of by label; give every "
                 "job the same DB")
      ->type_name("DB");
  app.add_option("--merge", o.merge,
                 "run nothing: merge the latest run of each database given (the --shard I/N "
                 "jobs of one plan, or its runs on several hosts) into one run in --db, and "
                 "report it (table, --json, --junit) as one run; a shard --db already holds is "
                 "skipped, so merging again adds only what is new")
      ->expected(1, -1)
      ->type_name("DB...");
  app.add_flag("--rerun-failed", o.rerun_failed,
               "run only the cases the latest run in --db judged not as expected");
  app.add_flag("--fail-fast", o.fail_fast,
               "stop after the first case that is not as expected (the run is recorded as "
               "stopped there, with what ran judged)");
  app.add_option("--shuffle", o.shuffle,
                 "run the cases in an order drawn from SEED (a fresh seed when none is given; "
                 "each repeat gets its own order); the seed is printed and recorded in the run, "
                 "and cpreplay replays a pooled case after the cases that really preceded it")
      ->expected(0, 1)
      ->default_str("random")
      ->type_name("[=SEED]");
  app.add_option("-j,--jobs", o.jobs,
                 "run up to N worlds at once, each on its own share of the cores (cpu: its ranks "
                 "pinned to them) or GPUs (cuda: CUDA_VISIBLE_DEVICES; worlds of two jobs never "
                 "share a GPU); each execution records where it ran; default: as many worlds of "
                 "the largest size as the cores (cpu) or GPUs (cuda) hold, at most 8 (auto); "
                 "1: one at a time")
      ->type_name("N|auto")
      ->default_str("auto")
      ->transform(jobs_validator());
  app.add_option("--repeat", o.repeat, "run the plan N times (outputs that vary: nondeterministic)")
      ->check(positive_count_validator());
  add_timeout_option(app, o.shared.run.timeout_override_s);
  app.add_option("--placement", o.placement,
                 "allocator placement policy: best_fit (address-ordered) | counter "
                 "(allocation-order) | never_reuse | shuffled (reuse order drawn from the case "
                 "seed, the same on every rank)");
  add_trace_option(app, o.shared.trace, "DIR",
                   "each execution of every case with a verdict or not as expected to "
                   "DIR/case-<id>-<mode>-<repeat>.json");
  app.add_flag("--json", o.json, "print one JSON document on stdout and nothing else there");
  app.add_flag("--list", o.list,
               "print the planned cases (plan positions, not case ids) and exit; with --json as "
               "one JSON document");
  add_standby_option(app, o.shared.run.standby, "fresh executions (--mode fresh or both)");
  add_launch_options(app, launch);
}

// What --help says after the options: the checks, exit codes, crash safety, progress, Ctrl-C.
std::string record_footer() {
  return fmt::format(
      "Every completed execution's logs are checked: stream races (verdict stream_race, with the "
      "racing ops, buffer and fix), symmetric layouts that differ across ranks (allocator_order), "
      "collectives called differently (collective_mismatch) and reads of bytes nothing wrote "
      "(uninitialized_read); a finding counts against the run unless the case seeds that bug.\n"
      "Exit codes: 0 every case met its expectation; 1 a case failed, crashed, hung, had a "
      "finding, "
      "diverged between fresh and pooled or was nondeterministic unexpectedly; 2 bad usage, an "
      "unusable database or an infrastructure error.\n"
      "Every execution is committed to --db in its own transaction as it completes (on a "
      "writer thread, so the next case need not wait); Ctrl-C and --fail-fast store every "
      "result before judging. A killed run stays visibly incomplete and loses at most the "
      "executions still queued (at most {}). Replay a case with: cpreplay --db PATH --case ID\n"
      "Progress goes to stderr: on a TTY one line (position, elapsed, ETA, unexpected so far), "
      "otherwise one line per execution as it finishes (status, mode, label, milliseconds); "
      "colours only on a TTY and never with NO_COLOR set.\n"
      "Ctrl-C (or SIGTERM/SIGHUP) stops the run: its ranks are killed, what ran is recorded and "
      "reported, and the exit code is 128 + the signal (130 for Ctrl-C); a second Ctrl-C quits "
      "at once.",
      kMaxQueuedExecutions);
}

}  // namespace

int run_record(const RecordOptions& o, std::ostream& out, std::ostream& err, bool progress,
               bool color, const std::vector<std::string>& argv) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!o.merge.empty()) return run_merge(o, out, err, color, argv);
  RecordSetup s = resolve(o);
  const std::optional<std::vector<CaseInstance>> plan = plan_of(o, s, err);
  if (!plan) return 0;
  if (o.list) {
    print_plan(out, *plan, o.json);
    return 0;
  }
  if (plan->empty()) {  // an empty shard: a run of no case, recorded and reported (for --merge)
    RecordWriter writer(o.db, run_meta(o, s, argv));
    return finish_run(o, s, Ran{*plan, {}, PlanRun{}, t0}, writer, out, err, color);
  }
  if (!o.junit.empty()) check_file_target("--junit", o.junit);  // before the run, not after
  const std::vector<JobSlot> slots = slots_of(o, s, *plan, err);
  const int jobs = static_cast<int>(slots.size());
  // A MASTER_PORT per job that no other cprr on this host shares, held until the run ends;
  // claimed before the run is written, so a bad base leaves nothing in the database.
  const std::vector<PortClaim> ports = claim_ports(jobs, master_port_base());
  if (s.backend == "cuda") say_gpu_sharing(*plan, o, smallest_gpu_share(slots), err);
  if (!o.shared.trace.empty()) prepare_trace_dir(o.shared.trace);
  RecordWriter writer(o.db, run_meta(o, s, argv));
  const std::vector<int64_t> case_ids = writer.add_cases(*plan);
  const PlanRun executed = run_plan_jobs(
      RecordPlan{*plan, case_ids, s.modes, o.repeat, s.placement, o.fail_fast, s.shuffle_seed},
      jobs,
      [&](int job) {
        ControllerConfig cc = controller_config(o, s);
        cc.master_port = ports[job].port();
        if (jobs > 1) place_job(cc, slots[job], job, jobs, s.backend);
        return std::make_unique<Controller>(std::move(cc));
      },
      writer,
      progress ? ProgressStyle::tty : (o.log_lines ? ProgressStyle::lines : ProgressStyle::none),
      err);
  return finish_run(o, s, Ran{*plan, case_ids, executed, t0}, writer, out, err, color);
}

int record_main(int argc, char** argv) {
  RecordOptions o;
  CLI::App app{
      "cprecord: run multi-rank test cases in a pool of rank processes or in fresh "
      "processes, and report per-case status."};
  LaunchFlags launch;
  add_record_options(app, o, launch);
  app.footer(record_footer());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const bool tty_err = ::isatty(STDERR_FILENO) != 0;
  std::optional<InterruptWatch> interrupt;  // Ctrl-C ends the run cleanly: record, report, exit
  const bool color = ::isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr && !o.json;
  try {
    interrupt.emplace();
    o.shared.interrupt = &*interrupt;
    o.log_lines = !tty_err;  // a CI log gets a line per execution as it finishes
    o.launch = finish_launch_options(launch);
    o.shared.run.fork_from_template = python_template_from_env();
    return run_record(o, std::cout, std::cerr, tty_err, color,
                      std::vector<std::string>(argv, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "cprecord: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace cprr

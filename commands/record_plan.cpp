#include "commands/record_plan.h"

#include <fmt/ranges.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>

#include "cli/cli_options.h"
#include "cli/report.h"
#include "data/shard.h"
#include "data/text_forms.h"
#include "recorder/engine/plan.h"
#include "runtime/backend.h"
#include "runtime/error.h"
#include "runtime/placement.h"
#include "runtime/transport_choice.h"
#include "schema/record_reader.h"
#include "schema/store.h"

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

// The checks CLI11's validators make, repeated for in-process callers of run_record.
void check_counts(const RecordOptions& o) {
  if (o.repeat < 1) {
    CPRR_THROW_AS(UsageError, "--repeat {}: must be a whole number from 1 to 1000000", o.repeat);
  }
  check_shared(o.shared);
}

std::vector<Mode> modes_of(const std::string& mode) {
  if (std::optional<std::vector<Mode>> modes = parse_modes(mode)) return *std::move(modes);
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

}  // namespace

std::string absolute(const std::string& path) {
  std::error_code ec;
  const auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.string();
}

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

}  // namespace cprr

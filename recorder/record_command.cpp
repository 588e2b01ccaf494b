#include "recorder/record_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "recorder/controller.h"
#include "recorder/junit.h"
#include "recorder/record_writer.h"
#include "recorder/report.h"
#include "runtime/backend.h"
#include "runtime/error.h"

namespace cprr {
namespace {

std::string default_worker() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "cpworker" : (self.parent_path() / "cpworker").string();
}

std::optional<std::regex> compile_filter(const std::string& filter) {
  if (filter.empty()) return std::nullopt;
  try {
    return std::regex(filter, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    CPRR_THROW_AS(UsageError, "--filter '{}' is not a valid regular expression: {}", filter,
                  e.what());
  }
}

void check_worker(const std::string& worker) {
  if (::access(worker.c_str(), X_OK) != 0) {
    CPRR_THROW_AS(UsageError,
                  "--worker {}: not an executable file; build it (cmake --build build) or pass "
                  "the path of your worker binary",
                  worker);
  }
}

void print_plan(std::ostream& out, const std::vector<CaseInstance>& plan) {
  for (const CaseInstance& inst : plan) {
    out << fmt::format("{:>4}  {}  expect={}\n", inst.id, inst.label(),
                       expect_name(inst.info.options.expect));
  }
}

std::vector<Mode> modes_of(const std::string& mode) {
  if (mode == "pool") return {Mode::pool};
  if (mode == "fresh") return {Mode::fresh};
  if (mode == "both") return {Mode::fresh, Mode::pool};
  CPRR_THROW_AS(UsageError, "--mode {}: use pool, fresh or both", mode);
}

std::string absolute(const std::string& path) {
  std::error_code ec;
  const auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.string();
}

}  // namespace

int run_record(const RecordOptions& o, std::ostream& out, std::ostream& err, bool progress,
               bool color, const std::vector<std::string>& argv) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string worker = absolute(o.worker.empty() ? default_worker() : o.worker);
  check_worker(worker);
  const std::string backend = resolve_backend(o.backend);
  const std::vector<Mode> modes = modes_of(o.mode);
  if (o.repeat < 1) CPRR_THROW_AS(UsageError, "--repeat {}: must be at least 1", o.repeat);
  const auto filter = compile_filter(o.filter);
  const std::optional<Placement> placement = parse_placement(o.placement);
  if (!placement) {
    CPRR_THROW_AS(UsageError, "--placement {}: use best_fit, counter or never_reuse", o.placement);
  }
  const std::vector<CaseInstance> plan = expand(fetch_catalog(worker), filter);
  if (plan.empty()) {
    CPRR_THROW_AS(UsageError, "no case matches --filter '{}'; run with --list to see the cases",
                  o.filter);
  }
  if (o.list) {
    print_plan(out, plan);
    return 0;
  }
  RecordWriter writer(
      o.db, RunMeta{backend, o.mode, std::string(placement_name(*placement)), worker, argv});
  const std::vector<int64_t> case_ids = writer.add_cases(plan);
  ControllerConfig cc;
  cc.worker = worker;
  cc.backend = backend;
  cc.timeout_override_s = o.timeout_s;
  Controller controller(cc);
  std::vector<ExecutionResult> results;
  const std::size_t total = plan.size() * modes.size() * static_cast<std::size_t>(o.repeat);
  for (int rep = 0; rep < o.repeat; ++rep) {
    for (std::size_t i = 0; i < plan.size(); ++i) {
      for (Mode mode : modes) {
        if (progress) {
          err << fmt::format("\r\033[K[{}/{}] {} {}", results.size() + 1, total, mode_name(mode),
                             plan[i].label())
              << std::flush;
        }
        results.push_back(controller.run(plan[i], mode, *placement));
        results.back().attempt = rep + 1;
        writer.write(results.back(), case_ids[i]);
      }
    }
  }
  controller.close_pools();
  if (progress) err << "\r\033[K" << std::flush;
  const auto outcomes = summarize(plan, case_ids, results);
  const int code = exit_code_for(outcomes);
  writer.finish(code);
  const RunInfo info{writer.run_id(),
                     absolute(o.db),
                     worker,
                     backend,
                     o.mode,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  if (!o.junit.empty()) write_junit_file(o.junit, plan, results, info.wall_s);
  if (o.json) {
    print_json(out, outcomes, info);
  } else {
    print_table(out, results, outcomes, info, color);
  }
  return code;
}

int record_main(int argc, char** argv) {
  RecordOptions o;
  CLI::App app{
      "cprecord: run multi-rank test cases in a pool of rank processes or in fresh "
      "processes, and report per-case status."};
  app.add_option("--worker", o.worker,
                 "worker binary holding the cases (default: cpworker next to cprecord)");
  app.add_option("--backend", o.backend, "device backend: auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--db", o.db, "SQLite file to record into (created when missing)");
  app.add_option("--mode", o.mode,
                 "pool: one reused world per world size; fresh: a world per case; both: each case "
                 "fresh and pooled, flagging cases whose results differ")
      ->check(CLI::IsMember({"pool", "fresh", "both"}));
  app.add_option("--junit", o.junit, "also write JUnit XML (one testcase per execution) to PATH");
  app.add_option("--filter", o.filter,
                 "regex searched in each case label 'name{params}@world_size'");
  app.add_option("--repeat", o.repeat, "run the plan N times (outputs that vary: nondeterministic)")
      ->check(CLI::PositiveNumber);
  app.add_option("--timeout", o.timeout_s,
                 "per-case deadline in seconds, overriding each case's own (default 60)")
      ->check(CLI::PositiveNumber);
  app.add_option("--placement", o.placement,
                 "allocator placement policy: best_fit (address-ordered) | counter "
                 "(allocation-order) | never_reuse");
  app.add_flag("--json", o.json, "print one JSON document on stdout and nothing else there");
  app.add_flag("--list", o.list, "print the planned cases and exit");
  app.footer(
      "Exit codes: 0 every case met its expectation; 1 a case failed, crashed, hung, diverged "
      "between fresh and pooled or was nondeterministic unexpectedly; 2 bad usage, an unusable "
      "database or an infrastructure error.\n"
      "Every execution is committed to --db as it completes; a killed run stays visibly "
      "incomplete. Replay a case with: cpreplay --db PATH --case ID\n"
      "Progress goes to stderr on a TTY; colours only on a TTY and never with NO_COLOR set.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const bool tty_err = ::isatty(STDERR_FILENO) != 0;
  const bool color = ::isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr && !o.json;
  try {
    return run_record(o, std::cout, std::cerr, tty_err, color,
                      std::vector<std::string>(argv, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "cprecord: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace cprr

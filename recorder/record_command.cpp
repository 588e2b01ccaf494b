#include "recorder/record_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "recorder/controller.h"
#include "recorder/report.h"
#include "runtime/error.h"

namespace cprr {
namespace {

std::string default_worker() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "cpworker" : (self.parent_path() / "cpworker").string();
}

// The backends this build can run. "auto" picks the CUDA backend once it exists and a GPU is
// present; until then it is the CPU backend.
std::string resolve_backend(const std::string& requested) {
  if (requested == "auto" || requested == "cpu") return "cpu";
  CPRR_THROW_AS(UsageError,
                "--backend {}: this build has no {} backend yet; use --backend cpu or auto",
                requested, requested);
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

}  // namespace

int run_record(const RecordOptions& o, std::ostream& out, std::ostream& err, bool progress,
               bool color) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string worker = o.worker.empty() ? default_worker() : o.worker;
  check_worker(worker);
  const std::string backend = resolve_backend(o.backend);
  if (o.mode != "pool" && o.mode != "fresh") {
    CPRR_THROW_AS(UsageError, "--mode {}: use pool or fresh", o.mode);
  }
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
  ControllerConfig cc;
  cc.worker = worker;
  cc.backend = backend;
  cc.timeout_override_s = o.timeout_s;
  Controller controller(cc);
  const Mode mode = o.mode == "fresh" ? Mode::fresh : Mode::pool;
  std::vector<ExecutionResult> results;
  const std::size_t total = plan.size() * static_cast<std::size_t>(o.repeat);
  for (int rep = 0; rep < o.repeat; ++rep) {
    for (const CaseInstance& inst : plan) {
      if (progress) {
        err << fmt::format("\r\033[K[{}/{}] {} {}", results.size() + 1, total, o.mode, inst.label())
            << std::flush;
      }
      results.push_back(controller.run(inst, mode, *placement));
    }
  }
  controller.close_pools();
  if (progress) err << "\r\033[K" << std::flush;
  const auto outcomes = summarize(plan, results);
  const RunInfo info{worker, backend, o.mode,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  if (o.json) {
    print_json(out, outcomes, info);
  } else {
    print_table(out, results, outcomes, info, color);
  }
  return exit_code_for(outcomes);
}

int record_main(int argc, char** argv) {
  RecordOptions o;
  CLI::App app{"cprecord: run multi-rank test cases in a pool of rank processes or in fresh "
               "processes, and report per-case status."};
  app.add_option("--worker", o.worker,
                 "worker binary holding the cases (default: cpworker next to cprecord)");
  app.add_option("--backend", o.backend, "device backend: auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--mode", o.mode, "pool: one reused world per world size; fresh: a world per case")
      ->check(CLI::IsMember({"pool", "fresh"}));
  app.add_option("--filter", o.filter, "regex searched in each case label 'name{params}@world_size'");
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
      "Exit codes: 0 every case met its expectation; 1 a case failed, crashed, hung or was "
      "nondeterministic unexpectedly; 2 bad usage or an infrastructure error.\n"
      "Progress goes to stderr on a TTY; colours only on a TTY and never with NO_COLOR set.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const bool tty_err = ::isatty(STDERR_FILENO) != 0;
  const bool color = ::isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr && !o.json;
  try {
    return run_record(o, std::cout, std::cerr, tty_err, color);
  } catch (const std::exception& e) {
    std::cerr << "cprecord: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace cprr

// Python world start: the per-case cost of a trivial Python case
// (python_bench_cases.py: one checked all-reduce of 1024 floats at W=2, on --backend: cpu, or cuda
// with the ranks on the GPUs there are, sharing one when there is one), each
// configuration in its own controller, back to back in one run (prints figures and ratios side by
// side; asserts nothing):
//   fresh, forked      a fresh world per case, its ranks forked from the template process that
//                      imported torch and the case file once (the default);
//   fresh, spawned     a fresh world per case, each rank posix_spawn'ed and importing torch
//                      itself (CPRR_PYTHON_TEMPLATE=off);
//   fresh, standby K   forked, with the worlds of the next K cases starting while one runs;
//   pooled             one world for every case (forked);
//   pooled, empty      the same for an empty case (bench/py_empty, --empty-cases of them): cprr's
//                      own cost per pooled Python case, the dispatch round trip, the case's
//                      set-up and tear-down in the rank, its record;
//   torchrun           one `python3 -m torch.distributed.run --nproc_per_node 2` per case of the
//                      same all-reduce as a plain script (torch_allreduce.py, --cpu on cpu),
//                      timed whole.
// Per case is the configuration's wall time over its cases, from the first world asked for to
// the last case's result: the template's own start (once per controller) is in it, as is every
// world start that standby did not hide. Each fresh row also gives the median world start and its
// "spawn ranks" and "exec and load" steps (engine/world_startup.h); the catalog is fetched once,
// before any row.
//
//   cprr_bench_python [--backend cpu|cuda] [--pyworker PATH] [--cases N] [--standby K]
//                     [--torch-runs K] [--case-file PATH] [--torch-script PATH] [--python PATH]
#include <fmt/format.h>
#include <sys/wait.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "runtime/startup_phases.h"
#include "tools/bench/timing.h"

namespace {

using Clock = std::chrono::steady_clock;
using cprr::bench::median;

struct Setup {
  std::string pyworker = CPRR_PYWORKER_PATH;
  std::string cases_file = CPRR_BENCH_SOURCE_DIR "/python_bench_cases.py";
  std::string torch_script = CPRR_BENCH_SOURCE_DIR "/torch_allreduce.py";
  std::string python;  ///< empty: the interpreter cprr-pyworker runs with (its #! line)
  std::string backend = "cpu";
};

struct Row {
  std::string what;
  int cases = 0;
  double total_ms = 0;
  double first_ms = 0;           ///< the first case's wall time (the template's start in it)
  std::vector<double> rest_ms;   ///< every later case's
  std::vector<double> start_ms;  ///< each world's own start (startup_ms), fresh rows
  std::vector<double> spawn_ms;  ///< its "spawn ranks" step
  std::vector<double> exec_ms;   ///< its "exec and load" step
};

double step_ms(const std::vector<cprr::StartupPhase>& phases, const std::string& name) {
  for (const cprr::StartupPhase& p : phases) {
    if (p.name == name) return p.ms;
  }
  return 0;
}

cprr::ControllerConfig python_config(const Setup& s, bool fork, int standby) {
  cprr::ControllerConfig cc;
  cc.worker = s.pyworker;
  cc.worker_args = {"--cases", s.cases_file};
  cc.backend = cprr::resolve_backend(s.backend);
  cc.run.fork_from_template = fork;
  cc.run.standby = standby;
  cc.env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
  return cc;
}

// `cases` runs of `inst` in one controller, as cprecord runs a plan of them.
Row run_row(const std::string& what, const Setup& s, const cprr::CaseInstance& inst, int cases,
            cprr::Mode mode, bool fork, int standby) {
  Row row{what, cases};
  cprr::Controller c(python_config(s, fork, standby));
  const auto t0 = Clock::now();
  for (int i = 0; i < cases; ++i) {
    if (mode == cprr::Mode::fresh) {
      c.foresee(std::vector<int>(std::min(cases - i, standby + 1), inst.world_size), true);
    }
    const cprr::ExecutionResult r = c.run(inst, mode);
    if (r.status != cprr::ExecStatus::pass) {
      std::fprintf(stderr, "%s (%s) did not pass: %s\n", inst.label().c_str(), what.c_str(),
                   r.summary.c_str());
      std::exit(1);
    }
    (i == 0 ? row.first_ms : row.rest_ms.emplace_back()) = r.wall_ms;
    if (!r.startup_phases.empty()) {
      row.start_ms.push_back(r.startup_ms);
      row.spawn_ms.push_back(step_ms(r.startup_phases, "spawn ranks"));
      row.exec_ms.push_back(step_ms(r.startup_phases, "exec and load"));
    }
  }
  row.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return row;
}

// The interpreter on the #! line of `script` ("" when there is none).
std::string interpreter_of(const std::string& script) {
  std::ifstream in(script);
  std::string line;
  if (!std::getline(in, line) || line.rfind("#!", 0) != 0) return "";
  return line.substr(2,
                     line.find(' ') == std::string::npos ? std::string::npos : line.find(' ') - 2);
}

// Wall time of each of `runs` torchrun launches of the plain script on s.backend; empty when one
// fails (or none was asked for).
std::vector<double> torchrun(const Setup& s, int runs) {
  // --redirects/--tee given: torch 1.13's own defaults ("0") fail to parse on Python 3.11 (an
  // IntFlag's iteration no longer holds its zero member), Debian 12's pairing.
  const std::string cmd = fmt::format(
      "{} -m torch.distributed.run --nproc_per_node 2 --redirects 1 --tee 2 {}{} "
      ">/dev/null 2>&1",
      s.python, s.torch_script, s.backend == "cpu" ? " --cpu" : "");
  return cprr::bench::command_ms(cmd, runs);
}

void print_row(const Row& r, double torch_ms, double spawned_ms) {
  const double per_case = r.total_ms / r.cases;
  std::printf("%-26s %10.1f %10.1f %10.1f %9.2f", r.what.c_str(), per_case, r.first_ms,
              median(r.rest_ms), r.total_ms / 1e3);
  if (!r.start_ms.empty()) {
    std::printf(" %9.1f %7.1f %7.1f", median(r.start_ms), median(r.spawn_ms), median(r.exec_ms));
  } else {
    std::printf(" %9s %7s %7s", "-", "-", "-");
  }
  std::printf("   %6.2fx", spawned_ms / per_case);
  if (torch_ms > 0) std::printf(" %8.2fx", torch_ms / per_case);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  int cases = 10, standby = 2, torch_runs = 5, empty_cases = 500;
  CLI::App app{"cprr Python world start: fresh (forked / spawned / standby) vs pooled vs torchrun"};
  app.add_option("--backend", s.backend, "where the ranks run: cpu, or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--pyworker", s.pyworker, "cprr-pyworker (next to cprecord in the build)");
  app.add_option("--cases", cases, "cases per configuration")->check(CLI::PositiveNumber);
  app.add_option("--empty-cases", empty_cases, "cases of the pooled empty row")
      ->check(CLI::PositiveNumber);
  app.add_option("--standby", standby, "standby worlds of the standby row")
      ->check(CLI::PositiveNumber);
  app.add_option("--torch-runs", torch_runs, "torchrun launches to time (0: skip)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--case-file", s.cases_file, "the Python case file (bench/py_all_reduce)");
  app.add_option("--torch-script", s.torch_script, "the plain all-reduce script torchrun runs");
  app.add_option("--python", s.python, "the interpreter for torchrun (default: cprr-pyworker's)");
  CLI11_PARSE(app, argc, argv);
  if (std::ifstream(s.pyworker).fail()) {
    std::printf("skipped: no %s (the Python package is not built)\n", s.pyworker.c_str());
    return 0;
  }
  if (s.python.empty()) s.python = interpreter_of(s.pyworker);
  try {
    const cprr::ControllerConfig probe = python_config(s, true, 0);
    const auto plan = cprr::expand(cprr::fetch_catalog(probe.worker, probe.worker_args),
                                   std::regex("^bench/py_(all_reduce|empty)@2$"));
    if (plan.size() != 2) {
      std::fprintf(stderr, "no bench/py_all_reduce@2 and bench/py_empty@2 in %s\n",
                   s.cases_file.c_str());
      return 2;
    }
    const cprr::CaseInstance& inst = plan[0].info.name == "bench/py_all_reduce" ? plan[0] : plan[1];
    const cprr::CaseInstance& empty = plan[0].info.name == "bench/py_empty" ? plan[0] : plan[1];
    const Row forked = run_row("fresh, forked", s, inst, cases, cprr::Mode::fresh, true, 0);
    const Row spawned = run_row("fresh, spawned", s, inst, cases, cprr::Mode::fresh, false, 0);
    const Row standing = run_row(fmt::format("fresh, forked, standby {}", standby), s, inst, cases,
                                 cprr::Mode::fresh, true, standby);
    const Row pooled = run_row("pooled (forked)", s, inst, cases, cprr::Mode::pool, true, 0);
    const Row pooled_empty =
        run_row("pooled, empty case", s, empty, empty_cases, cprr::Mode::pool, true, 0);
    const std::vector<double> torch = torchrun(s, torch_runs);
    const double torch_ms = median(torch);
    const double spawned_per_case = spawned.total_ms / spawned.cases;
    std::printf("%s at W=2 on %s, %d cases per row (each row its own controller)\n",
                inst.label().c_str(), s.backend.c_str(), cases);
    std::printf("%-26s %10s %10s %10s %9s %9s %7s %7s   %7s %9s\n", "", "per case", "first",
                "rest med", "total s", "start med", "spawn", "exec", "vs spwn", "vs torchrun");
    for (const Row* r : {&forked, &spawned, &standing, &pooled}) {
      print_row(*r, torch_ms, spawned_per_case);
    }
    std::printf("%s, %d cases:\n", empty.label().c_str(), empty_cases);
    print_row(pooled_empty, torch_ms, spawned_per_case);
    if (!torch.empty()) {
      std::printf(
          "%-26s %10.1f %10.1f %10.1f %9.2f   (median of %zu launches; total "
          "EXTRAPOLATED x %d cases)\n",
          "torchrun per case", torch_ms, torch.front(), torch_ms, torch_ms * cases / 1e3,
          torch.size(), cases);
    } else {
      std::printf("torchrun: skipped (--torch-runs 0, or it failed)\n");
    }
    std::printf(
        "(ms unless said; vs: how many times cheaper per case than fresh spawned and "
        "than torchrun)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cprr_bench_python: %s\n", e.what());
    return 2;
  }
  return 0;
}

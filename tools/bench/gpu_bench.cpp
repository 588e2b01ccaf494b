// GPU benchmarks, each measured side by side in one run on the GPU machine (prints figures,
// asserts nothing):
//  1. suite: N short cases at W=2 (and each --world-size) on the cuda backend, a fresh world per
//     case (process start,
//     CUDA context, NCCL init) against one pooled world, the two samples interleaved (case i fresh,
//     then case i pooled), so drift over the run hits both alike: per-case median and total;
//  2. world start: where a fresh world's start time goes (spawn, exec and load, CUDA context,
//     arenas, NCCL communicator, symmetric window...), the median of each step over the suite's
//     fresh worlds (the steps add up to the world's start: engine/world_startup.h);
//  3. fresh only: the same N cases in fresh mode only, back to back: each world's shutdown on the
//     path, then off it (retired on the controller's thread), then with each
//     count in --standby (fresh worlds for the next cases started while one runs): total and per
//     case, what `cprecord --mode fresh --standby K` would cost, and the median world start
//     (worlds started side by side slow each other down: the bound of fresh mode with standby);
// With fewer GPUs than ranks the ranks share them (their collectives through Gloo, staged through
// host memory) and every figure says which transport it ran with; --collectives gloo times the
// staged path on a GPU per rank, next to NCCL.
//  3b. goals: a case with no collective (healthy/noop) and one with one all-reduce
//     (healthy/all_reduce, count 1), fresh only, each run --goal-runs times: median wall,
//     world start and start-up paid inside the case at first use (NCCL's wait, the symmetric
//     arena and window: runtime/cuda_backend.h);
//  4. torchrun: `torchrun --nproc-per-node 2` of a trivial all-reduce script per case, the
//     baseline of seed 001 (~8.9 s per spawn there), timed on --torch-runs launches; its suite
//     total is extrapolated from them (median x cases), and the output says so. Needs 2 GPUs
//     (the script's NCCL refuses two ranks on one).
// Recording overhead has its own benchmark: cprr_bench_recording --backend cuda.
//
//   cprr_bench_gpu [--worker PATH] [--cases N] [--standby K...] [--torch-runs K]
//                  [--torch-script PATH] [--world-size W...] [--collectives auto|nccl|gloo]
//                  [--goal-runs K]
#include <fmt/format.h>
#include <sys/wait.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <vector>

#include "cli/cli_options.h"
#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "runtime/backend.h"
#include "runtime/startup_phases.h"
#include "tools/bench/timing.h"

namespace {

using Clock = std::chrono::steady_clock;

using cprr::bench::median;

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// Runs `inst` in `mode`, exiting on anything but a pass: a benchmark of failures means nothing.
cprr::ExecutionResult run_case(cprr::Controller& c, const cprr::CaseInstance& inst,
                               cprr::Mode mode) {
  cprr::ExecutionResult r = c.run(inst, mode);
  if (r.status != cprr::ExecStatus::pass) {
    std::fprintf(stderr, "%s did not pass: %s\n", inst.label().c_str(), r.summary.c_str());
    std::exit(1);
  }
  return r;
}

// The short cases of world size `w`: healthy and fixed ones, without the 100 MiB banner.
std::vector<cprr::CaseInstance> short_cases(const std::string& worker, int w) {
  const auto plan =
      cprr::expand(cprr::fetch_catalog(worker),
                   std::regex(fmt::format("^(healthy|fixed)/[a-z_]+(\\{{.*\\}})?@{}$", w)));
  std::vector<cprr::CaseInstance> picked;
  for (const auto& inst : plan) {
    if (inst.info.name != "healthy/banner_flood") picked.push_back(inst);
  }
  return picked;
}

// What every controller of the run is made with.
struct Setup {
  std::string worker;
  std::optional<cprr::CollectivesRequest> collectives;  ///< --collectives (unset: auto)
};

cprr::ControllerConfig cuda_config(const Setup& setup, int standby) {
  cprr::ControllerConfig cc;
  cc.worker = setup.worker;
  cc.backend = cprr::BackendKind::cuda;
  cc.run.standby = standby;
  cc.run.collectives = setup.collectives;
  return cc;
}

struct Suite {
  std::vector<double> fresh, pool;                      ///< per-case wall ms
  std::vector<std::vector<cprr::StartupPhase>> starts;  ///< each fresh world's start steps
  std::string collectives, rank_gpus;                   ///< how its worlds ran (the last one's)
};

void suite(const Setup& setup, const std::vector<cprr::CaseInstance>& picked, int cases,
           Suite& out) {
  cprr::Controller c(cuda_config(setup, 0));
  run_case(c, picked[0], cprr::Mode::pool);  // the pooled world's start is no case's cost
  for (int i = 0; i < cases; ++i) {
    const cprr::ExecutionResult f = run_case(c, picked[i % picked.size()], cprr::Mode::fresh);
    out.fresh.push_back(f.wall_ms);
    out.starts.push_back(f.startup_phases);
    const cprr::ExecutionResult p = run_case(c, picked[i % picked.size()], cprr::Mode::pool);
    out.pool.push_back(p.wall_ms);
    out.collectives = p.collectives;
    out.rank_gpus = p.rank_gpus;
  }
}

struct FreshSuite {
  double total_ms = 0;
  std::vector<double> start_ms;  ///< each world's own start (startup_ms), ahead of its case or not
};

// The cases in fresh mode only, back to back, with `standby` worlds started ahead and healthy
// worlds shut down off the path (`retire`) or on it.
FreshSuite fresh_suite(const Setup& setup, const std::vector<cprr::CaseInstance>& picked, int cases,
                       int standby, bool retire) {
  FreshSuite out;
  cprr::ControllerConfig cc = cuda_config(setup, standby);
  cc.retire_in_background = retire;
  cprr::Controller c(cc);
  const auto t0 = Clock::now();
  for (int i = 0; i < cases; ++i) {
    std::vector<int> sizes;  // this case's world and the `standby` after it (those left)
    for (int k = i; k < cases && k <= i + standby; ++k) {
      sizes.push_back(picked[k % picked.size()].world_size);
    }
    c.foresee(sizes, true);
    out.start_ms.push_back(run_case(c, picked[i % picked.size()], cprr::Mode::fresh).startup_ms);
  }
  out.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return out;
}

// healthy/noop at world size `w`, for a size without short cases of its own.
std::vector<cprr::CaseInstance> noop_at(const std::string& worker, int w) {
  const auto plan = cprr::expand(cprr::fetch_catalog(worker), std::regex("^healthy/noop@"));
  if (plan.empty()) return {};
  cprr::CaseInstance one = plan.front();
  one.world_size = w;
  return {one};
}

// Fresh mode back to back: shutdown on the path, then retired, then with each standby count.
void print_fresh_suites(const Setup& setup, const std::vector<cprr::CaseInstance>& picked,
                        int cases, const std::vector<int>& standby) {
  const int w = picked.front().world_size;
  // A world's start is its own, however many started beside it: standby worlds start side by
  // side, and what they cost each other shows as a slower start.
  const auto row = [&](const char* what, const FreshSuite& f) {
    std::printf(
        "fresh only, W=%d, %-36s %8.1f ms/case %8.2f s total (measured: %d cases), "
        "world start %.0f ms (median)\n",
        w, what, f.total_ms / cases, f.total_ms / 1e3, cases, median(f.start_ms));
  };
  row("--standby 0, shutdown on the path", fresh_suite(setup, picked, cases, 0, false));
  row("--standby 0", fresh_suite(setup, picked, cases, 0, true));
  for (int n : standby) {
    if (n > 0)
      row(fmt::format("--standby {}", n).c_str(), fresh_suite(setup, picked, cases, n, true));
  }
}

// The median of each start step over `starts`, in the order of the first world's steps.
void print_world_start(const std::vector<std::vector<cprr::StartupPhase>>& starts, int w) {
  if (starts.empty() || starts.front().empty()) return;
  std::printf("world start, median over %zu fresh worlds (W=%d, cuda):\n", starts.size(), w);
  std::vector<double> totals;
  for (const auto& w : starts) totals.push_back(cprr::total_ms(w));
  for (const cprr::StartupPhase& step : starts.front()) {
    std::vector<double> ms;
    for (const auto& w : starts) {
      for (const cprr::StartupPhase& p : w) {
        if (p.name == step.name) ms.push_back(p.ms);
      }
    }
    std::printf("  %-24s %9.1f ms\n", step.name.c_str(), median(ms));
  }
  std::printf("  %-24s %9.1f ms\n", "total (median)", median(totals));
}

// The goal cases' fresh executions: wall, world start and first-use set-up, medians.
void print_goal_cases(const Setup& setup, int w, int runs) {
  const std::pair<const char*, const char*> goals[] = {
      {"no collective", "^healthy/noop@"},
      {"one all_reduce", "^healthy/all_reduce\\{count=1,dtype=f32\\}@"}};
  cprr::Controller c(cuda_config(setup, 0));
  const auto catalog = cprr::fetch_catalog(setup.worker);
  for (const auto& [what, pattern] : goals) {
    const auto plan = cprr::expand(catalog, std::regex(pattern));
    if (plan.empty()) continue;
    cprr::CaseInstance inst = plan.front();
    inst.world_size = w;
    std::vector<double> wall, start, first_use;
    std::map<std::string, std::vector<double>> steps;
    for (int i = 0; i < runs; ++i) {
      const cprr::ExecutionResult r = run_case(c, inst, cprr::Mode::fresh);
      wall.push_back(r.wall_ms);
      start.push_back(r.startup_ms);
      first_use.push_back(cprr::total_ms(r.first_use_phases));
      for (const cprr::StartupPhase& p : r.first_use_phases) steps[p.name].push_back(p.ms);
    }
    std::string detail;
    for (auto& [name, ms] : steps) detail += fmt::format(", {} {:.1f}", name, median(ms));
    std::printf(
        "goal, W=%d, %-15s fresh %8.1f ms (median of %d): world start %.1f, paid at first use "
        "%.1f%s\n",
        w, what, median(wall), runs, median(start), median(first_use), detail.c_str());
  }
}

std::vector<double> torchrun(const std::string& script, int runs) {
  if (std::system("python3 -c 'import torch' >/dev/null 2>&1") != 0) return {};
  const std::string cmd =
      "python3 -m torch.distributed.run --nproc-per-node 2 " + script + " >/dev/null 2>&1";
  return cprr::bench::command_ms(cmd, runs);
}

}  // namespace

int main(int argc, char** argv) {
  Setup setup{CPRR_WORKER_PATH};
  std::string script = "tools/bench/torch_allreduce.py";
  int cases = 50, torch_runs = 5, goal_runs = 5;
  std::vector<int> standby{4};  // besides 0, which always runs
  std::vector<int> sizes{2};
  CLI::App app{"cprr GPU benchmarks: fresh vs pooled vs torchrun per case, world start, standby"};
  app.add_option("--worker", setup.worker, "worker binary");
  app.add_option("--cases", cases, "cases in the suite")->check(CLI::PositiveNumber);
  app.add_option("--standby", standby,
                 "standby counts to time the fresh-only suite with, besides 0")
      ->expected(0, -1)
      ->check(CLI::NonNegativeNumber);
  app.add_option("--world-size", sizes,
                 "world sizes to run the suites at; with fewer GPUs than ranks the ranks share "
                 "them (collectives through Gloo, staged through host memory)")
      ->expected(1, -1)
      ->check(CLI::PositiveNumber);
  cprr::add_collectives_option(app, setup.collectives,
                               "auto (gloo times the staged path on a GPU per rank)");
  app.add_option("--torch-runs", torch_runs, "torchrun launches to time (0: skip)");
  app.add_option("--goal-runs", goal_runs,
                 "fresh runs of each goal case (no collective, one all_reduce; 0: skip)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--torch-script", script, "the trivial all-reduce script torchrun runs");
  CLI11_PARSE(app, argc, argv);
  std::string why;
  const int gpus = cprr::visible_gpus(&why);
  if (gpus < 1) {
    std::fprintf(stderr, "cprr_bench_gpu needs a GPU: %s\n", why.c_str());
    return 2;
  }
  for (const int w : sizes) {
    std::vector<cprr::CaseInstance> picked = short_cases(setup.worker, w);
    if (picked.empty()) picked = noop_at(setup.worker, w);
    if (picked.empty()) {
      std::fprintf(stderr, "no short case and no healthy/noop in %s\n", setup.worker.c_str());
      return 2;
    }
    Suite s;
    suite(setup, picked, cases, s);
    std::printf("== W=%d on %d GPU(s): collectives %s, ranks on GPUs %s\n", w, gpus,
                s.collectives.c_str(), s.rank_gpus.c_str());
    print_world_start(s.starts, w);
    std::printf("suite: %d short cases at W=%d (cuda), fresh and pooled runs interleaved\n", cases,
                w);
    std::printf("%-22s %12s %12s\n", "", "per case ms", "total s");
    std::printf("%-22s %12.1f %12.2f   (measured: %d runs)\n", "fresh world per case",
                median(s.fresh), sum(s.fresh) / 1e3, cases);
    std::printf("%-22s %12.2f %12.2f   (measured: %d runs)\n", "pooled world", median(s.pool),
                sum(s.pool) / 1e3, cases);
    print_fresh_suites(setup, picked, cases, standby);
    if (goal_runs > 0) print_goal_cases(setup, w, goal_runs);
    std::printf("W=%d fresh/pool per-case cost: %.0fx\n", w, median(s.fresh) / median(s.pool));
  }
  if (gpus < 2) {
    std::printf("torchrun: skipped (its NCCL needs 2 GPUs; %d visible)\n", gpus);
  } else if (const std::vector<double> torch = torchrun(script, torch_runs); !torch.empty()) {
    std::printf("%-22s %12.1f %12.2f   (EXTRAPOLATED: median of %zu launches x %d cases)\n",
                "torchrun per case (W=2)", median(torch), median(torch) * cases / 1e3, torch.size(),
                cases);
  } else {
    std::printf("torchrun: skipped (no torch, or --torch-runs 0)\n");
  }
  std::printf("recording overhead: see cprr_bench_recording --backend cuda\n");
  return 0;
}

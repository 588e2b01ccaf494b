// GPU benchmarks, each measured side by side in one run on the GPU machine (prints figures,
// asserts nothing):
//  1. suite: N short cases at W=2 on the cuda backend, a fresh world per case (process start,
//     CUDA context, NCCL init) against one pooled world, the two samples interleaved (case i fresh,
//     then case i pooled), so drift over the run hits both alike: per-case median and total;
//  2. world start: where a fresh world's start time goes (spawn, exec and load, CUDA context,
//     arenas, NCCL communicator, symmetric window...), the median of each step over the suite's
//     fresh worlds (the steps add up to the world's start: engine/world_startup.h);
//  3. fresh only: the same N cases in fresh mode only, back to back: each world's shutdown on the
//     path (as before issue 14), then off it (retired on the controller's thread), then with each
//     count in --standby (fresh worlds for the next cases started while one runs): total and per
//     case, what `cprecord --mode fresh --standby K` would cost, and the median world start
//     (worlds started side by side slow each other down: the bound of fresh mode with standby);
// With one GPU only the world start and the fresh-only suites run, on healthy/noop as a one-rank
// case (W=1), and the output says so.
//  4. torchrun: `torchrun --nproc-per-node 2` of a trivial all-reduce script per case, the
//     baseline of seed 001 (~8.9 s per spawn there), timed on --torch-runs launches; its suite
//     total is extrapolated from them (median x cases), and the output says so.
// Recording overhead has its own benchmark: cprr_bench_recording --backend cuda.
//
//   cprr_bench_gpu [--worker PATH] [--cases N] [--standby K...] [--torch-runs K]
//                  [--torch-script PATH]
#include <fmt/format.h>
#include <sys/wait.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

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

// The short W=2 cases: healthy and fixed ones, without the 100 MiB banner.
std::vector<cprr::CaseInstance> short_cases(const std::string& worker) {
  const auto plan = cprr::expand(cprr::fetch_catalog(worker),
                                 std::regex("^(healthy|fixed)/[a-z_]+(\\{.*\\})?@2$"));
  std::vector<cprr::CaseInstance> picked;
  for (const auto& inst : plan) {
    if (inst.info.name != "healthy/banner_flood") picked.push_back(inst);
  }
  return picked;
}

cprr::ControllerConfig cuda_config(const std::string& worker, int standby) {
  cprr::ControllerConfig cc;
  cc.worker = worker;
  cc.backend = "cuda";
  cc.standby = standby;
  return cc;
}

struct Suite {
  std::vector<double> fresh, pool;                      ///< per-case wall ms
  std::vector<std::vector<cprr::StartupPhase>> starts;  ///< each fresh world's start steps
};

void suite(const std::string& worker, const std::vector<cprr::CaseInstance>& picked, int cases,
           Suite& out) {
  cprr::Controller c(cuda_config(worker, 0));
  run_case(c, picked[0], cprr::Mode::pool);  // the pooled world's start is no case's cost
  for (int i = 0; i < cases; ++i) {
    const cprr::ExecutionResult f = run_case(c, picked[i % picked.size()], cprr::Mode::fresh);
    out.fresh.push_back(f.wall_ms);
    out.starts.push_back(f.startup_phases);
    out.pool.push_back(run_case(c, picked[i % picked.size()], cprr::Mode::pool).wall_ms);
  }
}

struct FreshSuite {
  double total_ms = 0;
  std::vector<double> start_ms;  ///< each world's own start (startup_ms), ahead of its case or not
};

// The cases in fresh mode only, back to back, with `standby` worlds started ahead and healthy
// worlds shut down off the path (`retire`) or on it (as before issue 14).
FreshSuite fresh_suite(const std::string& worker, const std::vector<cprr::CaseInstance>& picked,
                       int cases, int standby, bool retire) {
  FreshSuite out;
  cprr::ControllerConfig cc = cuda_config(worker, standby);
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

// healthy/noop as a one-rank case (a machine with one GPU): noop does nothing one rank cannot.
std::vector<cprr::CaseInstance> single_rank_noop(const std::vector<cprr::CaseInstance>& picked) {
  auto noop = std::find_if(picked.begin(), picked.end(), [](const cprr::CaseInstance& i) {
    return i.info.name == "healthy/noop";
  });
  if (noop == picked.end()) return {};
  cprr::CaseInstance one = *noop;
  one.world_size = 1;
  return {one};
}

// The start steps of `worlds` fresh worlds of `inst`.
std::vector<std::vector<cprr::StartupPhase>> world_starts(const std::string& worker,
                                                          const cprr::CaseInstance& inst,
                                                          int worlds) {
  cprr::Controller c(cuda_config(worker, 0));
  std::vector<std::vector<cprr::StartupPhase>> out;
  for (int i = 0; i < worlds; ++i) {
    out.push_back(run_case(c, inst, cprr::Mode::fresh).startup_phases);
  }
  return out;
}

// Fresh mode back to back: shutdown on the path, then retired, then with each standby count.
void print_fresh_suites(const std::string& worker, const std::vector<cprr::CaseInstance>& picked,
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
  row("--standby 0, shutdown on the path", fresh_suite(worker, picked, cases, 0, false));
  row("--standby 0", fresh_suite(worker, picked, cases, 0, true));
  for (int n : standby) {
    if (n > 0)
      row(fmt::format("--standby {}", n).c_str(), fresh_suite(worker, picked, cases, n, true));
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

std::vector<double> torchrun(const std::string& script, int runs) {
  std::vector<double> ms;
  if (std::system("python3 -c 'import torch' >/dev/null 2>&1") != 0) return ms;
  const std::string cmd =
      "python3 -m torch.distributed.run --nproc-per-node 2 " + script + " >/dev/null 2>&1";
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    const int status = std::system(cmd.c_str());
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "torchrun failed (status %d): %s\n", status, cmd.c_str());
      return {};
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  std::string worker = CPRR_WORKER_PATH, script = "tools/bench/torch_allreduce.py";
  int cases = 50, torch_runs = 5;
  std::vector<int> standby{4};  // besides 0, which always runs
  CLI::App app{"cprr GPU benchmarks: fresh vs pooled vs torchrun per case, world start, standby"};
  app.add_option("--worker", worker, "worker binary");
  app.add_option("--cases", cases, "cases in the suite")->check(CLI::PositiveNumber);
  app.add_option("--standby", standby,
                 "standby counts to time the fresh-only suite with, besides 0")
      ->expected(0, -1)
      ->check(CLI::NonNegativeNumber);
  app.add_option("--torch-runs", torch_runs, "torchrun launches to time (0: skip)");
  app.add_option("--torch-script", script, "the trivial all-reduce script torchrun runs");
  CLI11_PARSE(app, argc, argv);
  std::string why;
  const int gpus = cprr::visible_gpus(&why);
  if (gpus < 1) {
    std::fprintf(stderr, "cprr_bench_gpu needs a GPU: %s\n", why.c_str());
    return 2;
  }
  const std::vector<cprr::CaseInstance> picked = short_cases(worker);
  if (gpus < 2) {
    // One GPU: the W=2 figures cannot be measured; the same ones for one-rank worlds can.
    std::printf("W=2 suite and torchrun: skipped (they need 2 GPUs; %d visible)\n", gpus);
    const std::vector<cprr::CaseInstance> one = single_rank_noop(picked);
    if (one.empty()) return 2;
    print_world_start(world_starts(worker, one.front(), cases), 1);
    print_fresh_suites(worker, one, cases, standby);
    return 0;
  }
  Suite s;
  suite(worker, picked, cases, s);
  const std::vector<double> torch = torchrun(script, torch_runs);

  print_world_start(s.starts, 2);
  std::printf("suite: %d short cases at W=2 (cuda), fresh and pooled runs interleaved\n", cases);
  std::printf("%-22s %12s %12s\n", "", "per case ms", "total s");
  std::printf("%-22s %12.1f %12.2f   (measured: %d runs)\n", "fresh world per case",
              median(s.fresh), sum(s.fresh) / 1e3, cases);
  std::printf("%-22s %12.2f %12.2f   (measured: %d runs)\n", "pooled world", median(s.pool),
              sum(s.pool) / 1e3, cases);
  if (!torch.empty()) {
    std::printf("%-22s %12.1f %12.2f   (EXTRAPOLATED: median of %zu launches x %d cases)\n",
                "torchrun per case", median(torch), median(torch) * cases / 1e3, torch.size(),
                cases);
  } else {
    std::printf("torchrun: skipped (no torch, or --torch-runs 0)\n");
  }
  print_fresh_suites(worker, picked, cases, standby);
  std::printf("fresh/pool per-case cost: %.0fx\n", median(s.fresh) / median(s.pool));
  if (!torch.empty())
    std::printf("torchrun/pool per-case cost: %.0fx\n", median(torch) / median(s.pool));
  std::printf("recording overhead: see cprr_bench_recording --backend cuda\n");
  return 0;
}

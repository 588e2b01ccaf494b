// GPU benchmarks, each measured side by side in one run on the GPU machine (prints figures,
// asserts nothing):
//  1. suite: 50 short cases at W=2 on the cuda backend, a fresh world per case (process start,
//     CUDA context, NCCL init) against one pooled world, the two samples interleaved (case i fresh,
//     then case i pooled), so drift over the run hits both alike: per-case median and total;
//  2. torchrun: `torchrun --nproc-per-node 2` of a trivial all-reduce script per case, the
//     baseline of seed 001 (~8.9 s per spawn there), timed on --torch-runs launches; its suite
//     total is extrapolated from them (median x cases), and the output says so.
// Recording overhead has its own benchmark: cprr_bench_recording --backend cuda.
//
//   cprr_bench_gpu [--worker PATH] [--cases N] [--torch-runs K] [--torch-script PATH]
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
#include "tools/bench/timing.h"

namespace {

using Clock = std::chrono::steady_clock;

using cprr::bench::median;

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// Runs `inst` in `mode`, exiting on anything but a pass: a benchmark of failures means nothing.
double run_ms(cprr::Controller& c, const cprr::CaseInstance& inst, cprr::Mode mode) {
  const auto t0 = Clock::now();
  const cprr::ExecutionResult r = c.run(inst, mode);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (r.status != cprr::ExecStatus::pass) {
    std::fprintf(stderr, "%s did not pass: %s\n", inst.label().c_str(), r.summary.c_str());
    std::exit(1);
  }
  return ms;
}

void suite(const std::string& worker, int cases, std::vector<double>& fresh,
           std::vector<double>& pool) {
  const auto plan = cprr::expand(cprr::fetch_catalog(worker),
                                 std::regex("^(healthy|fixed)/[a-z_]+(\\{.*\\})?@2$"));
  std::vector<cprr::CaseInstance> picked;
  for (const auto& inst : plan) {
    if (inst.info.name != "healthy/banner_flood") picked.push_back(inst);
  }
  cprr::ControllerConfig cc;
  cc.worker = worker;
  cc.backend = "cuda";
  cprr::Controller c(cc);
  run_ms(c, picked[0], cprr::Mode::pool);  // the pooled world's start is no case's cost
  for (int i = 0; i < cases; ++i) {
    fresh.push_back(run_ms(c, picked[i % picked.size()], cprr::Mode::fresh));
    pool.push_back(run_ms(c, picked[i % picked.size()], cprr::Mode::pool));
  }
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
  CLI::App app{"cprr GPU benchmarks: fresh vs pooled vs torchrun per case"};
  app.add_option("--worker", worker, "worker binary");
  app.add_option("--cases", cases, "cases in the suite")->check(CLI::PositiveNumber);
  app.add_option("--torch-runs", torch_runs, "torchrun launches to time (0: skip)");
  app.add_option("--torch-script", script, "the trivial all-reduce script torchrun runs");
  CLI11_PARSE(app, argc, argv);
  std::string why;
  if (cprr::visible_gpus(&why) < 2) {
    std::fprintf(stderr, "cprr_bench_gpu needs 2 GPUs: %s\n",
                 why.empty() ? "fewer are visible" : why.c_str());
    return 2;
  }
  std::vector<double> fresh, pool;
  suite(worker, cases, fresh, pool);
  const std::vector<double> torch = torchrun(script, torch_runs);

  std::printf("suite: %d short cases at W=2 (cuda), fresh and pooled runs interleaved\n", cases);
  std::printf("%-22s %12s %12s\n", "", "per case ms", "total s");
  std::printf("%-22s %12.1f %12.2f   (measured: %d runs)\n", "fresh world per case", median(fresh),
              sum(fresh) / 1e3, cases);
  std::printf("%-22s %12.2f %12.2f   (measured: %d runs)\n", "pooled world", median(pool),
              sum(pool) / 1e3, cases);
  if (!torch.empty()) {
    std::printf("%-22s %12.1f %12.2f   (EXTRAPOLATED: median of %zu launches x %d cases)\n",
                "torchrun per case", median(torch), median(torch) * cases / 1e3, torch.size(),
                cases);
  } else {
    std::printf("torchrun: skipped (no torch, or --torch-runs 0)\n");
  }
  std::printf("fresh/pool per-case cost: %.0fx\n", median(fresh) / median(pool));
  if (!torch.empty())
    std::printf("torchrun/pool per-case cost: %.0fx\n", median(torch) / median(pool));
  std::printf("recording overhead: see cprr_bench_recording --backend cuda\n");
  return 0;
}

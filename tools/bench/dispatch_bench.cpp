// Dispatch benchmark: healthy/noop round trip in a pooled world against a fresh world per case,
// at W=2 and W=4, measured side by side in one run on the backend asked for (--backend; auto is
// cuda where a GPU is visible). A world with more ranks than GPUs shares them (collectives through
// Gloo, staged through host memory); each size's line says how its collectives travelled.
// Prints figures; asserts nothing.
//
//   cprr_bench_dispatch [--backend auto|cpu|cuda] [--worker PATH] [--pool-runs N] [--fresh-runs N]
//                       [--collectives auto|nccl|gloo]
//
// Target: pooled round trip at W=4 <= 1 ms median on the 2-core development machine.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "cli/cli_options.h"
#include "recorder/engine/controller.h"
#include "runtime/backend.h"

namespace {

struct Figures {
  double median = 0;
  double p99 = 0;
  double mean = 0;
};

Figures figures(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  Figures f;
  f.median = ms[ms.size() / 2];
  f.p99 = ms[std::min(ms.size() - 1, static_cast<std::size_t>(ms.size() * 0.99))];
  for (double v : ms) f.mean += v / static_cast<double>(ms.size());
  return f;
}

std::vector<double> measure(cprr::Controller& c, const cprr::CaseInstance& inst, cprr::Mode mode,
                            int runs) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const cprr::ExecutionResult r = c.run(inst, mode);
    if (r.status != cprr::ExecStatus::pass) {
      std::fprintf(stderr, "noop did not pass: %s\n", r.summary.c_str());
      std::exit(1);
    }
    ms.push_back(r.wall_ms);
  }
  return ms;
}

// Measures every world size of healthy/noop on `backend` (already resolved) and prints them.
int run(const std::string& worker, cprr::BackendKind backend,
        std::optional<cprr::CollectivesRequest> collectives, int pool_runs, int fresh_runs) {
  const auto plan = cprr::expand(cprr::fetch_catalog(worker), std::regex("^healthy/noop@"));
  cprr::ControllerConfig cc;
  cc.worker = worker;
  cc.backend = backend;
  cc.run.collectives = collectives;
  const int gpus = cc.backend == cprr::BackendKind::cuda ? cprr::visible_gpus() : 0;
  std::printf("backend: %s, %d GPU(s) (ranks share them where a world has more ranks)\n",
              std::string(cprr::backend_name(cc.backend)).c_str(), gpus);
  std::printf("%-4s %-6s %8s %10s %10s %10s\n", "W", "mode", "runs", "median_ms", "p99_ms",
              "mean_ms");
  std::vector<std::pair<int, double>> ratios;
  for (const cprr::CaseInstance& inst : plan) {
    cprr::Controller c(cc);
    // Spawns the pooled world outside the measurement.
    const cprr::ExecutionResult first = c.run(inst, cprr::Mode::pool);
    std::printf("W=%d: collectives %s, ranks on GPUs %s\n", inst.world_size,
                first.collectives.c_str(), first.rank_gpus.empty() ? "-" : first.rank_gpus.c_str());
    const Figures pool = figures(measure(c, inst, cprr::Mode::pool, pool_runs));
    const Figures fresh = figures(measure(c, inst, cprr::Mode::fresh, fresh_runs));
    std::printf("%-4d %-6s %8d %10.3f %10.3f %10.3f\n", inst.world_size, "pool", pool_runs,
                pool.median, pool.p99, pool.mean);
    std::printf("%-4d %-6s %8d %10.3f %10.3f %10.3f\n", inst.world_size, "fresh", fresh_runs,
                fresh.median, fresh.p99, fresh.mean);
    ratios.emplace_back(inst.world_size, fresh.median / pool.median);
  }
  for (const auto& [w, ratio] : ratios) {
    std::printf("W=%d: fresh/pool median per-case cost = %.1fx\n", w, ratio);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string worker = CPRR_WORKER_PATH, backend = "auto";
  int pool_runs = 2000, fresh_runs = 30;
  CLI::App app{"cprr dispatch benchmark: pooled vs fresh per-case cost of healthy/noop"};
  app.add_option("--backend", backend, "auto | cpu | cuda (auto: cuda when a GPU is visible)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--worker", worker, "worker binary");
  app.add_option("--pool-runs", pool_runs, "pooled executions per world size");
  app.add_option("--fresh-runs", fresh_runs, "fresh executions per world size");
  std::optional<cprr::CollectivesRequest> collectives;
  cprr::add_collectives_option(app, collectives, "auto (cuda: gloo stages through host)");
  CLI11_PARSE(app, argc, argv);

  try {
    return run(worker, cprr::resolve_backend(backend), collectives, pool_runs, fresh_runs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cprr_bench_dispatch: %s\n", e.what());
    return 2;
  }
}

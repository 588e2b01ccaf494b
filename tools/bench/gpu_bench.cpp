// GPU benchmarks, each measured side by side in one run on the GPU machine (prints figures,
// asserts nothing):
//  1. suite: 50 short cases at W=2 on the cuda backend, a fresh world per case (process start,
//     CUDA context, NCCL init) against one pooled world: per-case median and total;
//  2. torchrun: `torchrun --nproc-per-node 2` of a trivial all-reduce script per case, the
//     baseline of seed 001 (~8.9 s per spawn there), timed on --torch-runs launches and scaled to
//     the suite's size;
//  3. recording: healthy/cp_ring with 256 MiB per output and probe per rank, pooled, recorded
//     (device hashing of every capture + SQLite) against not recorded (CPRR_CAPTURE=off).
//
//   cprr_bench_gpu [--worker PATH] [--cases N] [--torch-runs K] [--torch-script PATH]
//                  [--record-runs N] [--block ELEMENTS]
#include <sys/wait.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <vector>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "schema/record_writer.h"
#include "runtime/backend.h"
#include "tools/bench/timing.h"

namespace {

using Clock = std::chrono::steady_clock;

using cprr::bench::median;

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// Runs `inst` in `mode`, exiting on anything but a pass: a benchmark of failures means nothing.
double run_ms(cprr::Controller& c, const cprr::CaseInstance& inst, cprr::Mode mode,
              cprr::RecordWriter* writer = nullptr, int64_t case_id = 0) {
  const auto t0 = Clock::now();
  const cprr::ExecutionResult r = c.run(inst, mode);
  if (writer != nullptr) writer->write(r, case_id);
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
  for (int i = 0; i < cases; ++i)
    fresh.push_back(run_ms(c, picked[i % picked.size()], cprr::Mode::fresh));
  for (int i = 0; i < cases; ++i)
    pool.push_back(run_ms(c, picked[i % picked.size()], cprr::Mode::pool));
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

// Recorded vs not recorded, each in its own pooled world, alternating so drift hits both alike.
void recording(const std::string& worker, int runs, uint64_t block, std::vector<double>& on,
               std::vector<double>& off) {
  auto plan =
      cprr::expand(cprr::fetch_catalog(worker), std::regex("^healthy/cp_ring\\{block=1024\\}@2$"));
  cprr::CaseInstance inst = plan.at(0);
  inst.params["block"] = std::to_string(block);
  cprr::ControllerConfig cc;
  cc.worker = worker;
  cc.backend = "cuda";
  cprr::Controller recorded(cc);
  cc.env.emplace_back("CPRR_CAPTURE", "off");
  cprr::Controller plain(cc);
  const std::string db = (std::filesystem::temp_directory_path() / "cprr_bench_gpu.db").string();
  std::filesystem::remove(db);
  cprr::RecordWriter writer(db, cprr::RunMeta{"cuda", "pool", "best_fit", worker, {}, cprr::kProtocolVersion});
  const int64_t id = writer.add_cases({inst}).at(0);
  run_ms(recorded, inst, cprr::Mode::pool, &writer, id);  // warm-up: worlds and arenas
  run_ms(plain, inst, cprr::Mode::pool);
  for (int i = 0; i < runs; ++i) {
    on.push_back(run_ms(recorded, inst, cprr::Mode::pool, &writer, id));
    off.push_back(run_ms(plain, inst, cprr::Mode::pool));
  }
  writer.finish(0);
  std::filesystem::remove(db);
}

}  // namespace

int main(int argc, char** argv) {
  std::string worker = CPRR_WORKER_PATH, script = "tools/bench/torch_allreduce.py";
  int cases = 50, torch_runs = 5, record_runs = 5;
  uint64_t block = uint64_t{64} << 20;  // 64 Mi floats = 256 MiB per buffer
  CLI::App app{"cprr GPU benchmarks: fresh vs pooled vs torchrun per case, and recording overhead"};
  app.add_option("--worker", worker, "worker binary");
  app.add_option("--cases", cases, "cases in the suite")->check(CLI::PositiveNumber);
  app.add_option("--torch-runs", torch_runs, "torchrun launches to time (0: skip)");
  app.add_option("--torch-script", script, "the trivial all-reduce script torchrun runs");
  app.add_option("--record-runs", record_runs, "timed runs per recording variant")
      ->check(CLI::PositiveNumber);
  app.add_option("--block", block, "cp_ring block in floats (outputs are 4*block bytes)");
  CLI11_PARSE(app, argc, argv);
  std::string why;
  if (cprr::visible_gpus(&why) < 2) {
    std::fprintf(stderr, "cprr_bench_gpu needs 2 GPUs: %s\n",
                 why.empty() ? "fewer are visible" : why.c_str());
    return 2;
  }
  std::vector<double> fresh, pool, on, off;
  suite(worker, cases, fresh, pool);
  const std::vector<double> torch = torchrun(script, torch_runs);
  recording(worker, record_runs, block, on, off);

  std::printf("suite: %d short cases at W=2 (cuda)\n", cases);
  std::printf("%-22s %12s %12s\n", "", "per case ms", "total s");
  std::printf("%-22s %12.1f %12.2f\n", "fresh world per case", median(fresh), sum(fresh) / 1e3);
  std::printf("%-22s %12.2f %12.2f\n", "pooled world", median(pool), sum(pool) / 1e3);
  if (!torch.empty()) {
    std::printf("%-22s %12.1f %12.2f   (median of %zu launches x %d)\n", "torchrun per case",
                median(torch), median(torch) * cases / 1e3, torch.size(), cases);
  } else {
    std::printf("torchrun: skipped (no torch, or --torch-runs 0)\n");
  }
  std::printf("fresh/pool per-case cost: %.0fx\n", median(fresh) / median(pool));
  if (!torch.empty())
    std::printf("torchrun/pool per-case cost: %.0fx\n", median(torch) / median(pool));
  std::printf("recording: healthy/cp_ring@2, %llu MiB per capture, median of %d pooled runs\n",
              static_cast<unsigned long long>(block * 4 >> 20), record_runs);
  std::printf("  recorded %.1f ms, not recorded %.1f ms: overhead %.1f%%\n", median(on),
              median(off), 100.0 * (median(on) - median(off)) / median(off));
  return 0;
}

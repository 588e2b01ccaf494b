// CPU stream synchronization: synchronize() with nothing pending (every op done) against one
// that waits for an op, side by side in one run. Cases synchronize often, mostly with nothing
// left to wait for: that call must not cost a wake-up round trip with the stream's thread.
// Prints figures; asserts nothing.
//
//   cprr_bench_stream [--calls N] [--trials N]
//
// Target: idle synchronize <= 50 ns per call (a wake-up round trip is ~10 us) on the 2-core
// development machine.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "runtime/cpu_stream.h"

namespace {

using Clock = std::chrono::steady_clock;

// The best of `trials` runs of `calls` calls of `body`, in ns per call: a preempted run on a
// loaded box does not count.
template <class F>
double best_ns_per_call(int trials, int calls, F body) {
  double best = 1e300;
  for (int t = 0; t < trials; ++t) {
    const auto start = Clock::now();
    for (int i = 0; i < calls; ++i) body();
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    best = std::min(best, ns / calls);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 100000, trials = 5;
  CLI::App app{"cprr_bench_stream: the CPU stream's synchronize, idle against waiting for an op"};
  app.add_option("--calls", calls, "calls per trial")->check(CLI::PositiveNumber);
  app.add_option("--trials", trials, "trials; the best is printed")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  cprr::CpuStream s(0, "bench");
  s.enqueue("warm-up", [] {});
  s.synchronize();
  const double idle = best_ns_per_call(trials, calls, [&] { s.synchronize(); });
  const int waits = std::max(1, calls / 100);
  const double waiting = best_ns_per_call(trials, waits, [&] {
    s.enqueue("op", [] {});
    s.synchronize();
  });
  std::printf("synchronize, nothing pending:  %10.1f ns/call\n", idle);
  std::printf("enqueue + synchronize (a wait): %10.1f ns/call\n", waiting);
  std::printf("ratio: %.0fx (a wake-up round trip per idle call would make it about 1x)\n",
              waiting / idle);
  return 0;
}

// Live collective mismatch: how soon a world stuck in a collective its ranks
// called differently is named, against the deadline it would otherwise wait out. Runs
// bench/schedule_mismatch (recording_cases.cpp: the last rank calls barrier where the others
// call all_reduce) and its matching order side by side, pooled and fresh, W=2 and W=4, and
// prints per row the median of:
//   detect   the controller's own figure, from the last rank's flight-record entry to the
//            moment it stopped waiting (the execution's note: "stopped X ms after ...");
//   wall     the execution's wall time, mismatched and matching;
//   extra    wall(mismatched) - wall(matching): what naming it costs beyond a case that
//            completes, the status query and the flight-record comparison included (fresh rows;
//            in pooled rows the mismatched side also starts a world each time, since the stuck
//            one is replaced, and the matching side reuses its world).
// Prints figures only; asserts nothing.
//
//   cprr_bench_mismatch [--runs N] [--backend cpu|cuda]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "tools/bench/timing.h"

namespace {

using cprr::bench::median;

struct Row {
  std::vector<double> detect_ms, mismatch_ms, match_ms;
  int named = 0;  // executions whose note says they stopped early
};

double detect_ms(const std::string& note) {
  static const std::regex re("stopped ([0-9.]+) ms after the last rank entered");
  std::smatch m;
  return std::regex_search(note, m, re) ? std::stod(m[1]) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 10;
  std::string backend = "cpu";
  CLI::App app{"cprr live collective mismatch: time to name it vs the deadline"};
  app.add_option("--runs", runs, "executions per row")->check(CLI::PositiveNumber);
  app.add_option("--backend", backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  CLI11_PARSE(app, argc, argv);
  try {
    const auto catalog = cprr::fetch_catalog(CPRR_BENCH_WORKER_PATH);
    cprr::ControllerConfig cc;
    cc.worker = CPRR_BENCH_WORKER_PATH;
    cc.backend = cprr::resolve_backend(backend);
    // One controller each: a stuck pooled world is replaced, which the matching rows must not
    // pay for (a mismatched pooled row's wall includes that world's start).
    cprr::Controller stuck(cc);
    cprr::Controller matching(cc);
    std::printf("bench/schedule_mismatch on %s, %d executions per row (deadline %g s)\n",
                backend.c_str(), runs, 30.0);
    std::printf("%-12s %10s %12s %12s %10s %8s\n", "", "detect ms", "mismatch ms", "matching ms",
                "extra ms", "named");
    for (int w : {2, 4}) {
      for (cprr::Mode mode : {cprr::Mode::pool, cprr::Mode::fresh}) {
        const auto plan =
            cprr::expand(catalog, std::regex(fmt::format("^bench/schedule_mismatch.*@{}$", w)));
        cprr::CaseInstance bad = plan.at(0);
        cprr::CaseInstance good = bad;
        good.params["mismatch"] = "0";
        Row row;
        for (int i = 0; i < runs; ++i) {
          const cprr::ExecutionResult b = stuck.run(bad, mode);
          const cprr::ExecutionResult g = matching.run(good, mode);
          if (g.status != cprr::ExecStatus::pass) {
            std::fprintf(stderr, "the matching order did not pass: %s\n", g.summary.c_str());
            return 1;
          }
          const double d = detect_ms(b.note);
          if (d >= 0) {
            ++row.named;
            row.detect_ms.push_back(d);
          }
          row.mismatch_ms.push_back(b.wall_ms);
          row.match_ms.push_back(g.wall_ms);
        }
        const double extra = median(row.mismatch_ms) - median(row.match_ms);
        std::printf("%-12s %10.1f %12.1f %12.1f %10.1f %5d/%d\n",
                    fmt::format("W={} {}", w, cprr::mode_name(mode)).c_str(), median(row.detect_ms),
                    median(row.mismatch_ms), median(row.match_ms), extra, row.named, runs);
      }
    }
    std::printf(
        "(detect: from the last rank entering the collective to the controller stopping "
        "the wait; goal <= 100 ms on cpu)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cprr_bench_mismatch: %s\n", e.what());
    return 2;
  }
  return 0;
}

// Cost of the happens-before race check (analysis/happens_before.h) against the cases' own time:
// every corpus case runs once in its pooled world, then the checker runs over that execution's
// op and allocation logs (best of --reps), side by side. Prints figures; asserts nothing.
//
//   cprr_bench_race_check [--worker PATH] [--filter REGEX] [--reps N]
//
// Target: the check costs at most 5% of the case's own time over the corpus.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <regex>
#include <string>

#include "analysis/compare.h"
#include "analysis/happens_before.h"
#include "analysis/op_accesses.h"
#include "recorder/engine/controller.h"
#include "tools/bench/timing.h"

namespace {

struct Row {
  std::string label;
  std::size_t ops = 0;
  double case_ms = 0;   // the execution's wall time, dispatch to result
  double check_ms = 0;  // best of reps
  std::size_t races = 0;
};

Row measure(const cprr::ExecutionResult& e, int reps) {
  Row row{e.label};
  row.case_ms = e.wall_ms;
  const std::vector<const cprr::CaseCapture*> caps = cprr::captures_of(e);
  for (const cprr::CaseCapture* c : caps) row.ops += c != nullptr ? c->ops.size() : 0;
  row.check_ms = 1000 * cprr::bench::best_seconds(reps, [&] {
                   const cprr::HbResult r =
                       cprr::check_happens_before(cprr::ops_from_captures(caps));
                   row.races = r.race_count;
                 });
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::string worker = CPRR_WORKER_PATH, filter = ".";
  int reps = 20;
  CLI::App app{"happens-before race check cost against the corpus cases' own time"};
  app.add_option("--worker", worker, "worker binary holding the cases");
  app.add_option("--filter", filter, "regex searched in each case label");
  app.add_option("--reps", reps, "checker runs per execution (the best counts)");
  CLI11_PARSE(app, argc, argv);

  cprr::ControllerConfig cc;
  cc.worker = worker;
  cprr::Controller controller(cc);
  std::vector<Row> rows;
  for (const cprr::CaseInstance& inst :
       cprr::expand(cprr::fetch_catalog(worker), std::regex(filter))) {
    const cprr::ExecutionResult e = controller.run(inst, cprr::Mode::pool);
    if (cprr::completed(e)) rows.push_back(measure(e, reps));
  }
  double case_total = 0, check_total = 0, worst = 0;
  std::size_t races = 0;
  std::printf("%-48s %6s %10s %10s %8s\n", "case (pooled)", "ops", "case_ms", "check_ms", "ratio");
  for (const Row& r : rows) {
    const double ratio = r.case_ms > 0 ? r.check_ms / r.case_ms : 0;
    std::printf("%-48s %6zu %10.3f %10.4f %7.2f%%\n", r.label.c_str(), r.ops, r.case_ms, r.check_ms,
                100 * ratio);
    case_total += r.case_ms;
    check_total += r.check_ms;
    worst = std::max(worst, ratio);
    races += r.races;
  }
  std::printf(
      "\n%zu executions: check %.3f ms of %.3f ms case time = %.3f%% overall, worst case "
      "%.2f%%; %zu racing op pairs found\n",
      rows.size(), check_total, case_total, case_total > 0 ? 100 * check_total / case_total : 0,
      100 * worst, races);
  return 0;
}

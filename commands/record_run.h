#pragma once
// Running cprecord's plan: every repeat of every planned case in every mode, in order (or in
// --shuffle's order), each result handed to the store as it completes, progress on stderr,
// --fail-fast and --standby applied. The verb around it is record_command.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "data/case_info.h"
#include "data/execution.h"
#include "recorder/engine/controller.h"
#include "runtime/placement.h"
#include "schema/record_writer.h"

namespace cprr {

// What run_plan() runs: every repeat of every planned case in every mode.
struct RecordPlan {
  const std::vector<CaseInstance>& cases;
  const std::vector<int64_t>& case_ids;  ///< the store's ids, parallel to `cases`
  const std::vector<Mode>& modes;
  int repeat = 1;
  Placement placement = Placement::best_fit;
  bool fail_fast = false;                ///< stop after the first case judged not as expected
  std::optional<uint64_t> shuffle_seed;  ///< nullopt: every repeat in plan order
};

// What run_plan() ran, and why it ended early (--fail-fast) if it did.
struct PlanRun {
  std::vector<ExecutionResult> results;
  std::optional<std::string> stopped;
};

// How run_plan() shows progress on stderr: nothing, one line a TTY overwrites (position, elapsed
// time, ETA, unexpected so far, what runs), or for logs one line per execution as it finishes.
enum class ProgressStyle { none, tty, lines };

// Runs the plan in order (repeat, case, mode), handing each execution to the store as it
// completes and showing progress as `style` says; returns once every result is committed (a
// RecordQueue commits them on its own thread, so the next case starts at once). Stops at an
// interruption: the interrupted execution says nothing about its case, so it is neither recorded
// nor returned.
PlanRun run_plan(const RecordPlan& p, Controller& controller, RecordWriter& writer,
                 ProgressStyle style, std::ostream& err);

/// cprecord --jobs N: makes job `job`'s controller, on that job's own thread (a rank dies with
/// the thread that spawned it, so a job's worlds are started and shut down on its thread).
using MakeController = std::function<std::unique_ptr<Controller>(int job)>;

/// run_plan with `jobs` worlds at once: each job takes the plan's next execution as it frees up,
/// in run_plan's order, and runs it in its own controller (its pooled worlds keep their own pool
/// order, recorded as ever); --fail-fast and an interruption stop every job after the execution
/// it runs. The results come back in run_plan's order. `jobs` 1 is run_plan.
PlanRun run_plan_jobs(const RecordPlan& p, int jobs, const MakeController& make,
                      RecordWriter& writer, ProgressStyle style, std::ostream& err);

}  // namespace cprr

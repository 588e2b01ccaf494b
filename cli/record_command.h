#pragma once
// The cprecord verb: run the registered cases of a worker, fresh or pooled, and report.
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "data/launch_options.h"

namespace cprr {

class InterruptWatch;

struct RecordOptions {
  std::string worker;  ///< empty: the cpworker next to this executable
  /// --python: Python case files, directories of test_*.py / *_test.py, or module names; the
  /// worker is then cprr-pyworker (next to this executable unless --worker says otherwise).
  std::vector<std::string> python;
  std::string backend = "auto";
  std::string collectives = "auto";  ///< --collectives: auto | nccl | gloo
  std::string db = "cprr.db";        ///< the store; created when missing
  std::string junit;                 ///< JUnit XML path; empty: none
  std::string mode = "pool";         ///< pool | fresh | both
  std::string filter;                ///< regex searched in "name{params}@w"; empty: all
  std::string exclude;               ///< regex: matching labels are dropped; empty: none
  std::string shard;                 ///< "I/N": only the I-th of N stable parts; empty: all
  int repeat = 1;
  std::optional<double> timeout_s;
  std::string placement = "best_fit";  ///< allocator policy for every execution
  bool json = false;
  bool list = false;  ///< print the plan and exit
  /// One line per execution on `err` as it finishes (cprecord sets it when stderr is not a
  /// TTY, so CI logs show progress); the TTY progress line replaces it.
  bool log_lines = false;
  bool rerun_failed = false;  ///< only the cases the latest run in `db` had not as expected
  bool fail_fast = false;     ///< stop after the first case not as expected (run.stopped says so)
  /// --shuffle[=SEED]: run the cases in an order drawn from this seed ("random": a fresh seed,
  /// printed and recorded in run.shuffle_seed); nullopt: plan order.
  std::optional<std::string> shuffle;
  /// --trace DIR: time every op, and write a Chrome trace (cli/trace.h) of every execution
  /// of each case with a verdict or not as expected; empty: no timing, no traces.
  std::string trace_dir;
  /// --launcher and its options: how worlds start their ranks (recorded in run.launcher).
  LaunchOptions launch;
  /// --standby N: fresh worlds started ahead of their cases (Controller::foresee); 0: none.
  int standby = 0;
  /// --python's ranks fork from a template process (ControllerConfig::fork_from_template);
  /// cprecord sets it from CPRR_PYTHON_TEMPLATE.
  bool fork_from_template = true;
  /// Ctrl-C: when its signal arrives the run stops, is recorded and reported with what ran, and
  /// run_record returns 128 + the signal. Null: not interruptible (in-process callers).
  const InterruptWatch* interrupt = nullptr;
};

/// Runs the verb in-process: what the binary does after parsing. `progress` enables the TTY
/// progress line on `err`; `color` enables colour in the table; `argv` is recorded in the run
/// row. Returns the exit code.
int run_record(const RecordOptions& options, std::ostream& out, std::ostream& err, bool progress,
               bool color, const std::vector<std::string>& argv = {});

/// The cprecord main: parses argv (CLI11), then run_record.
int record_main(int argc, char** argv);

}  // namespace cprr

#pragma once
// The cprecord verb: run the registered cases of a worker, fresh or pooled, and report. Mirrors
// commands/replay_command.h.
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/cli_options.h"
#include "data/launch_options.h"

namespace cprr {

struct RecordOptions {
  /// --worker, --timeout, --trace DIR, --collectives, --standby, the template and Ctrl-C, as
  /// cpreplay takes them. shared.worker empty: the cpworker next to this executable (with
  /// --python, cprr-pyworker). shared.trace: time every op, and write a Chrome trace
  /// (cli/trace.h) of every execution of each case with a verdict or not as expected into this
  /// directory. Ctrl-C: the run stops, is recorded and reported with what ran, and run_record
  /// returns 128 + the signal.
  SharedOptions shared{.run{.collectives = CollectivesRequest::automatic}};
  /// --python: Python case files, directories of test_*.py / *_test.py, or module names; the
  /// worker is then cprr-pyworker (next to this executable unless --worker says otherwise).
  std::vector<std::string> python;
  /// --torchrun SCRIPT or --torchrun-module MODULE: one torchrun script as cases, unchanged, at
  /// each of `nproc_per_node`, with `script_args` (what follows --) as its arguments. The worker
  /// is cprr-pyworker, as with --python (which may come too).
  std::string torchrun;
  std::string torchrun_module;
  std::vector<int> nproc_per_node{1};
  /// --pytest: test files, directories or node ids whose pytest items are cases, each run in
  /// every rank (at its world_size marker, its class's world_size, else nproc_per_node).
  std::vector<std::string> pytest;
  /// After --: the --torchrun script's arguments, or --pytest's pytest arguments.
  std::vector<std::string> script_args;
  std::string backend = "auto";
  std::string db = "cprr.db";  ///< the store; created when missing
  std::string junit;           ///< JUnit XML path; empty: none
  std::string mode = "pool";   ///< pool | fresh | both
  std::string filter;          ///< regex searched in "name{params}@w"; empty: all
  std::string exclude;         ///< regex: matching labels are dropped; empty: none
  std::string shard;           ///< "I/N": only the I-th of N stable parts; empty: all
  std::string by_time;         ///< --by-time DB: --shard splits by DB's recorded case times
  /// --merge: run nothing; merge the latest run of each of these databases into `db`.
  std::vector<std::string> merge;
  int repeat = 1;
  /// --jobs N: up to N worlds at once, each on its own cores or GPUs (recorder/engine/job_slots.h);
  /// 0: the machine's default (default_jobs); 1: one world at a time.
  int jobs = 0;
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
  /// --launcher and its options: how worlds start their ranks (recorded in run.launcher).
  LaunchOptions launch;
};

/// Runs the verb in-process: what the binary does after parsing. `progress` enables the TTY
/// progress line on `err`; `color` enables colour in the table; `argv` is recorded in the run
/// row. Returns the exit code.
int run_record(const RecordOptions& options, std::ostream& out, std::ostream& err, bool progress,
               bool color, const std::vector<std::string>& argv = {});

/// The cprecord main: parses argv (CLI11), then run_record.
int record_main(int argc, char** argv);

}  // namespace cprr

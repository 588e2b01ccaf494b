#include "commands/record_options.h"

#include <fmt/format.h>

#include "cli/cli_options.h"
#include "schema/record_queue.h"

namespace cprr {

// cprecord's options, in the order --help lists them.
void add_record_options(CLI::App& app, RecordOptions& o, LaunchFlags& launch) {
  add_common_flags(app, "cprecord");
  add_worker_option(app, o.shared.worker,
                    "holding the cases (default: cpworker next to cprecord; with --python, "
                    "cprr-pyworker next to it)");
  app.add_option("--python", o.python,
                 "run Python cases (@cprr.case) instead of a worker binary's: test files, "
                 "directories of test_*.py / *_test.py files, or module names; the ranks are "
                 "cprr-pyworker processes, forked from one that imported torch and the case "
                 "files once and ran nothing (CPRR_PYTHON_TEMPLATE=off in the environment starts "
                 "each rank afresh instead)")
      ->expected(1, -1);
  app.add_option("--torchrun", o.torchrun,
                 "run a torchrun script as cases, unchanged: each rank runs it as __main__ with "
                 "torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...), "
                 "sys.argv the script and the arguments after --, sys.path[0] its folder; its "
                 "init_process_group gets the case's group; exit status 0 passes");
  app.add_option("-m,--torchrun-module", o.torchrun_module,
                 "as --torchrun, for a module run as python -m runs it (sys.path[0] the current "
                 "folder)");
  app.add_option("--pytest", o.pytest,
                 "run pytest items as cases, each in every rank of a world (as torchrun -m "
                 "pytest or DeepSpeed's DistributedTest run them): test files, directories or "
                 "node ids; pytest collects in the rank (arguments after -- are pytest's); an "
                 "item's world sizes are its @pytest.mark.world_size(N), else its class's "
                 "world_size, else --nproc-per-node; fixtures are per rank and end with each "
                 "case, tmp_path is one folder shared by the ranks")
      ->expected(1, -1);
  app.add_option("--nproc-per-node", o.nproc_per_node,
                 "the world sizes --torchrun runs its script at (torchrun's --nproc-per-node; "
                 "several: a case each), and --pytest's items that name none")
      ->expected(1, -1)
      ->check(CLI::Range(1, 1024));
  app.add_option("script_args", o.script_args,
                 "after --: the arguments of the --torchrun script (its sys.argv[1:]), or "
                 "pytest's with --pytest");
  app.add_option("--backend", o.backend, "device backend: auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_collectives_option(app, o.shared.run.collectives, "auto");
  app.add_option("--db", o.db, "SQLite file to record into (created when missing)");
  app.add_option("--mode", o.mode,
                 "pool: one reused world per world size; fresh: a world per case; both: each case "
                 "fresh and pooled, flagging cases whose results differ")
      ->check(CLI::IsMember({"pool", "fresh", "both"}));
  app.add_option("--junit", o.junit, "also write JUnit XML (one testcase per execution) to PATH");
  app.add_option("--filter", o.filter,
                 "regex searched in each case label 'name{params}@world_size'");
  app.add_option("--exclude", o.exclude,
                 "regex: drop the cases whose label it matches (after --filter)");
  app.add_option("--shard", o.shard,
                 "I/N: run only the I-th of N stable parts of the plan (a case's part depends "
                 "on its label alone; the N parts together are the plan), e.g. one per CI job");
  app.add_option("--by-time", o.by_time,
                 "with --shard: split the plan by the case times recorded in DB's latest run "
                 "(longest first onto the least-loaded shard) instead of by label; give every "
                 "job the same DB")
      ->type_name("DB");
  app.add_option("--merge", o.merge,
                 "run nothing: merge the latest run of each database given (the --shard I/N "
                 "jobs of one plan, or its runs on several hosts) into one run in --db, and "
                 "report it (table, --json, --junit) as one run; a shard --db already holds is "
                 "skipped, so merging again adds only what is new")
      ->expected(1, -1)
      ->type_name("DB...");
  app.add_flag("--rerun-failed", o.rerun_failed,
               "run only the cases the latest run in --db judged not as expected");
  app.add_flag("--fail-fast", o.fail_fast,
               "stop after the first case that is not as expected (the run is recorded as "
               "stopped there, with what ran judged)");
  app.add_option("--shuffle", o.shuffle,
                 "run the cases in an order drawn from SEED (a fresh seed when none is given; "
                 "each repeat gets its own order); the seed is printed and recorded in the run, "
                 "and cpreplay replays a pooled case after the cases that really preceded it")
      ->expected(0, 1)
      ->default_str("random")
      ->type_name("[=SEED]");
  app.add_option("-j,--jobs", o.jobs,
                 "run up to N worlds at once, each on its own share of the cores (cpu: its ranks "
                 "pinned to them) or GPUs (cuda: CUDA_VISIBLE_DEVICES; worlds of two jobs never "
                 "share a GPU); each execution records where it ran; default: as many worlds of "
                 "the largest size as the cores (cpu) or GPUs (cuda) hold, at most 8 (auto); "
                 "1: one at a time")
      ->type_name("N|auto")
      ->default_str("auto")
      ->transform(jobs_validator());
  app.add_option("--repeat", o.repeat, "run the plan N times (outputs that vary: nondeterministic)")
      ->check(positive_count_validator());
  add_timeout_option(app, o.shared.run.timeout_override_s);
  app.add_option("--placement", o.placement,
                 "allocator placement policy: best_fit (address-ordered) | counter "
                 "(allocation-order) | never_reuse | shuffled (reuse order drawn from the case "
                 "seed, the same on every rank)");
  add_trace_option(app, o.shared.trace, "DIR",
                   "each execution of every case with a verdict or not as expected to "
                   "DIR/case-<id>-<mode>-<repeat>.json");
  app.add_flag("--json", o.json, "print one JSON document on stdout and nothing else there");
  app.add_flag("--list", o.list,
               "print the planned cases (plan positions, not case ids) and exit; with --json as "
               "one JSON document");
  add_standby_option(app, o.shared.run.standby, "fresh executions (--mode fresh or both)");
  add_launch_options(app, launch);
}

// What --help says after the options: the checks, exit codes, crash safety, progress, Ctrl-C.
std::string record_footer() {
  return fmt::format(
      "Every completed execution's logs are checked: stream races (verdict stream_race, with the "
      "racing ops, buffer and fix), symmetric layouts that differ across ranks (allocator_order), "
      "collectives called differently (collective_mismatch) and reads of bytes nothing wrote "
      "(uninitialized_read); a finding counts against the run unless the case seeds that bug.\n"
      "Exit codes: 0 every case met its expectation; 1 a case failed, crashed, hung, had a "
      "finding, "
      "diverged between fresh and pooled or was nondeterministic unexpectedly; 2 bad usage, an "
      "unusable database or an infrastructure error.\n"
      "Every execution is committed to --db in its own transaction as it completes (on a "
      "writer thread, so the next case need not wait); Ctrl-C and --fail-fast store every "
      "result before judging. A killed run stays visibly incomplete and loses at most the "
      "executions still queued (at most {}). Replay a case with: cpreplay --db PATH --case ID\n"
      "Progress goes to stderr: on a TTY one line (position, elapsed, ETA, unexpected so far), "
      "otherwise one line per execution as it finishes (status, mode, label, milliseconds); "
      "colours only on a TTY and never with NO_COLOR set.\n"
      "Ctrl-C (or SIGTERM/SIGHUP) stops the run: its ranks are killed, what ran is recorded and "
      "reported, and the exit code is 128 + the signal (130 for Ctrl-C); a second Ctrl-C quits "
      "at once.",
      kMaxQueuedExecutions);
}

}  // namespace cprr

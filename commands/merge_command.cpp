#include "commands/merge_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "analysis/judgement.h"
#include "cli/junit.h"
#include "cli/report.h"
#include "cli/report_table.h"
#include "commands/record_plan.h"
#include "recorder/engine/launcher.h"
#include "runtime/atomic_file.h"
#include "runtime/error.h"
#include "schema/record_reader.h"
#include "schema/store_merge.h"

namespace cprr {
namespace {

// A merge runs no case: the options that choose or run cases would be silently ignored.
void refuse_run_options(const RecordOptions& o) {
  std::vector<std::string> given;
  const auto check = [&](bool set, const char* name) {
    if (set) given.emplace_back(name);
  };
  check(!o.python.empty(), "--python");
  check(!o.torchrun.empty() || !o.torchrun_module.empty(), "--torchrun");
  check(!o.pytest.empty(), "--pytest");
  check(!o.shared.worker.empty(), "--worker");
  check(!o.filter.empty(), "--filter");
  check(!o.exclude.empty(), "--exclude");
  check(!o.shard.empty(), "--shard");
  check(!o.by_time.empty(), "--by-time");
  check(o.rerun_failed, "--rerun-failed");
  check(o.fail_fast, "--fail-fast");
  check(o.list, "--list");
  check(o.shuffle.has_value(), "--shuffle");
  check(!o.shared.trace.empty(), "--trace");
  if (!given.empty()) {
    CPRR_THROW_AS(UsageError,
                  "--merge runs no case, so {} means nothing with it: give --merge the shard "
                  "databases, --db the file to merge into, and --json or --junit for the report",
                  fmt::join(given, ", "));
  }
}

// The merged run as one run: its cases in plan order, every execution with its logs, and the
// judgement cprecord made of them (judge_case), for the table, --json and --junit.
struct MergedReport {
  std::vector<CaseInstance> plan;
  std::vector<int64_t> case_ids;
  std::vector<ExecutionResult> results;
  double wall_s = 0;
};

MergedReport read_merged(const RecordReader& reader, int64_t run) {
  std::vector<RecordedCase> cases;
  for (RecordedCase& c : reader.cases()) {
    if (c.run_id == run) cases.push_back(std::move(c));
  }
  std::sort(cases.begin(), cases.end(), [](const RecordedCase& a, const RecordedCase& b) {
    return a.instance.id < b.instance.id;
  });
  MergedReport m;
  for (RecordedCase& c : cases) {
    for (RecordedExecution& e : reader.executions(c.id, RecordReader::Detail::logs)) {
      m.wall_s += e.result.wall_ms / 1000;
      m.results.push_back(std::move(e.result));
    }
    m.case_ids.push_back(c.id);
    m.plan.push_back(std::move(c.instance));
  }
  return m;
}

void say_shards(const MergeResult& m, const std::string& db, std::ostream& err) {
  for (const MergedShard& s : m.shards) {
    err << fmt::format("cprecord: {} run {} (shard {}, {} case(s)) {} run {} of {}\n", s.path,
                       s.source_run, s.shard, s.cases,
                       s.already ? "was merged before: it is" : "merged as", s.run, db);
  }
  if (!m.missing.empty()) {
    err << fmt::format(
        "cprecord: shard(s) {} of {} are not in the merged run: merge their databases into {} "
        "too (--merge adds them); until then the run counts as not as expected\n",
        fmt::join(m.missing, ", "), m.shard_count, db);
  }
}

}  // namespace

int run_merge(const RecordOptions& o, std::ostream& out, std::ostream& err, bool color,
              const std::vector<std::string>& argv) {
  refuse_run_options(o);
  if (!o.junit.empty()) check_file_target("--junit", o.junit);
  const MergeResult merged = merge_runs(o.db, o.merge, argv);
  say_shards(merged, o.db, err);
  const RecordReader reader(o.db);
  const RecordedRun run = reader.run(merged.run);
  const MergedReport m = read_merged(reader, merged.run);
  const std::vector<CaseOutcome> outcomes = summarize(m.plan, m.case_ids, m.results);
  RunInfo info{merged.run, absolute(o.db),   o.db,       run.worker, run.backend, run.mode,
               m.wall_s,   merged.exit_code, run.stopped};
  info.shuffle_seed = run.shuffle_seed;
  info.launcher = describe(run.launch);
  if (!o.junit.empty()) write_junit_file(o.junit, outcomes, m.results, info);
  if (o.json) {
    print_json(out, outcomes, info);
  } else {
    print_table(out, m.results, outcomes, info, color);
  }
  return merged.exit_code;
}

}  // namespace cprr

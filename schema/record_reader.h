#pragma once
// Reads runs back from the store: the mirror of schema/record_writer.h. Whatever the writer
// stores comes back as it was written: case instances (name, parameters, world size, seed) with
// the run's judgement, and executions with every rank's result, exit, watchdog answer, tails,
// captures and allocation, op and collective logs. Also finds a pooled execution's predecessors.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/case_info.h"
#include "data/code_file.h"
#include "data/execution.h"
#include "data/launch_options.h"
#include "runtime/backend_kind.h"
#include "schema/record.h"
#include "schema/store.h"

namespace cprr {

struct RecordedRun {
  int64_t id = 0;
  std::string started_at;
  std::optional<std::string> finished_at;  ///< nullopt: incomplete (the recorder died)
  std::optional<int> exit_code;
  std::optional<std::string> stopped;    ///< why it ended before its plan did (--fail-fast)
  std::optional<uint64_t> shuffle_seed;  ///< cprecord --shuffle: the seed of the case order
  LaunchOptions launch;                  ///< how its ranks were started (local before version 9)
  BackendKind backend = BackendKind::cpu;
  std::string mode, placement, worker;
  std::vector<std::string> worker_args;  ///< the worker's own arguments (none before version 11)
  std::vector<CodeFile> code;  ///< the case files or the worker as recorded (none before 12)
  std::string uid;             ///< names the run in every file it is merged into ("" before 17)
  std::string shard;           ///< cprecord --shard ("2/3"); "": the whole plan
  std::string plan_hash;       ///< of the plan before --shard ("" before 17)
  /// The merged run this one is a shard of (cprecord --merge): that run holds the cases, this
  /// one the executions. nullopt: not merged.
  std::optional<int64_t> merged_into;
  std::vector<std::pair<std::string, std::string>> environment;
  std::string tool_version, host;
  std::vector<std::string> argv;
  /// Library -> version as the run recorded them (numbers as their decimal text).
  std::vector<std::pair<std::string, std::string>> libraries;
};

/// Reads run.launcher's JSON object back (launch_json's inverse); throws cprr::Error naming
/// `run_id` when it is no such object.
LaunchOptions launch_from_json(const std::string& text, int64_t run_id);

struct RecordedCase {
  int64_t id = 0;  ///< test_case.id: what cpreplay --case takes
  int64_t run_id = 0;
  CaseInstance instance;
  /// What the run concluded about the case; nullopt while it was not judged (the recorder died
  /// first, or the file predates schema version 2).
  std::optional<CaseJudgement> judgement;
};

/// One stored execution. Ids are the store's: result.id and every rank's RankResult::execution
/// (and a busy watchdog's) are execution.id; result.case_id is the plan position and result.label
/// the case's label, as the recorder had them. The writer keeps the note inside the summary
/// ("summary; note"), so result.note comes back empty.
struct RecordedExecution {
  int64_t id = 0;
  int64_t case_id = 0;  ///< test_case.id
  ExecutionResult result;
};

/// Not for concurrent use from several threads: the reader prepares its statements once and
/// reuses them (cpreplay --list reads every execution of a database).
class RecordReader {
 public:
  /// Opens the database read-only; throws UsageError for a missing, foreign or corrupt file. A
  /// file of an older schema version is read as it is (what later versions added is absent).
  /// `option` names the file in errors (the option that gave it); `mode` read_finished for a
  /// database nothing writes any more (a merge's shards: Database::Mode).
  explicit RecordReader(const std::string& path, std::string_view option = "--db",
                        Database::Mode mode = Database::Mode::read_only);
  ~RecordReader();
  RecordReader(RecordReader&&) noexcept;
  RecordReader& operator=(RecordReader&&) noexcept;

  std::vector<RecordedRun> runs() const;
  /// The latest run that holds cases: the last run not merged into another (a merge adds its
  /// shard runs after the merged run they belong to). Throws UsageError naming `what` (the
  /// option that needs it) when the file holds no run.
  RecordedRun latest_run(const char* what) const;
  RecordedRun run(int64_t id) const;
  /// Each case of run `run_id` by label, with its executions' wall time summed (milliseconds);
  /// a case that never ran is absent.
  std::map<std::string, double> case_wall_ms(int64_t run_id) const;
  /// Every case of every run, in id order.
  std::vector<RecordedCase> cases() const;
  /// Throws UsageError "no case N in PATH; cpreplay --list shows the cases" for an unknown id.
  RecordedCase find_case(int64_t id) const;
  /// How much of an execution to read: its logs (allocation, op, collective rows) are most of a
  /// database and only the analyses over them need them; statuses and captures are the rest.
  enum class Detail { captures, logs };
  /// The case's executions in id order, each with what its ranks recorded (the logs only with
  /// Detail::logs). Text that no cprr writes (an unknown status, dtype, a malformed list) throws
  /// cprr::Error naming it.
  std::vector<RecordedExecution> executions(int64_t case_id, Detail detail = Detail::logs) const;
  /// For a pooled execution: the cases that ran before it in the same world, in order.
  std::vector<RecordedCase> predecessors(const RecordedExecution& execution) const;

 private:
  void read_ranks(int64_t execution, ExecutionResult& result, Detail detail) const;
  void read_captures(int64_t execution, std::vector<RankReport>& ranks) const;
  void read_logs(int64_t execution, std::vector<RankReport>& ranks) const;

  struct Statements;  // prepared once: executions() runs once per case
  Database db_;
  std::string case_columns_;  ///< what read_case takes, for this file's schema version
  std::unique_ptr<Statements> st_;
};

}  // namespace cprr

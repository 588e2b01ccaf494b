#pragma once
// The recorder proper: writes a cprecord run into the store (schema/schema.sql), one transaction
// per execution, so a killed recorder loses nothing it finished. Its mirror is
// schema/record_reader.h: what is written here is read back there, field for field.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/case_info.h"
#include "data/code_file.h"
#include "data/execution.h"
#include "data/launch_options.h"
#include "runtime/backend_kind.h"
#include "runtime/placement.h"
#include "schema/record.h"
#include "schema/store.h"

namespace cprr {

/// What a run row says about the run as a whole.
struct RunMeta {
  BackendKind backend = BackendKind::cpu;
  std::vector<Mode> modes;                    ///< run.mode: modes_name's word
  Placement placement = Placement::best_fit;  ///< run.placement: placement_name's word
  std::string worker;                         ///< absolute path
  std::vector<std::string> argv;
  uint32_t protocol_version = 0;  ///< of the controller and workers, for the run's library list
  std::optional<uint64_t> shuffle_seed;  ///< cprecord --shuffle: the seed of the case order
  LaunchOptions launch;                  ///< cprecord --launcher and its options
  std::vector<std::string> worker_args;  ///< given to the worker before the rank's own arguments
  std::vector<CodeFile> code;            ///< the case files or the worker, with content hashes
  std::string shard;      ///< cprecord --shard as run.shard keeps it ("2/3"); "": the whole plan
  std::string plan_hash;  ///< plan_hash() of the plan before --shard (run.plan_hash)
};

/// run.uid for a new run: 32 hex digits from the system's random source.
std::string new_run_uid();

/// run.launcher's JSON object (schema.sql) for a launcher other than local.
std::string launch_json(const LaunchOptions& o);

class RecordWriter {
 public:
  /// Opens (creating if needed) the database at `path` and inserts the run row (incomplete until
  /// finish()). Throws UsageError for an unusable --db.
  RecordWriter(const std::string& path, const RunMeta& meta);
  ~RecordWriter();

  int64_t run_id() const { return run_id_; }
  /// Inserts the planned cases in one transaction; the returned ids are indexed like `plan`.
  std::vector<int64_t> add_cases(const std::vector<CaseInstance>& plan);
  /// Writes one execution with all its per-rank rows (results, captures, logs) in one
  /// transaction, committed before returning. Returns the execution id.
  int64_t write(const ExecutionResult& result, int64_t case_id);
  /// Stores what the run concluded about its cases (test_case.verdict, as_expected,
  /// fresh_vs_pool), all in one transaction; call it once every execution is written, before
  /// finish(). A later call for the same case replaces its judgement. Throws cprr::Error for a
  /// case id that is not a case of this run (nothing is then written).
  void judge_cases(const std::vector<CaseJudgement>& judgements);
  /// Marks the run complete with cprecord's exit code.
  /// `stopped`: why the run ended before its plan did (cprecord --fail-fast); nullopt: it did not.
  void finish(int exit_code, const std::optional<std::string>& stopped = std::nullopt);

 private:
  void write_rank(int64_t execution, int rank, const RankReport& rep);
  void write_capture(int64_t execution, int rank, std::string_view kind, const Capture& c);
  void write_logs(int64_t execution, int rank, const CaseCapture& cap);
  void write_collectives(int64_t execution, int rank,
                         const std::vector<CollectiveRecord>& collectives);

  struct Statements;  // prepared once per writer: recording sits on the per-case path
  Database db_;
  std::unique_ptr<Statements> st_;
  int64_t run_id_ = 0;
};

/// The environment variables that shape a run (CPRR_*, NCCL_*, CUDA_*, OMP_*, GLOO_*), as a
/// JSON object; recorded per run and re-applied to the ranks on replay.
std::string relevant_environment_json();

}  // namespace cprr

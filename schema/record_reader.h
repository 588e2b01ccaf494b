#pragma once
// Reads runs back from the store: the mirror of schema/record_writer.h. Rebuilds case
// instances exactly (name, parameters, world size, seed) and executions with their per-rank
// results and captures, and finds a pooled execution's predecessors.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "recorder/data/case_info.h"
#include "recorder/data/execution.h"
#include "schema/store.h"

namespace cprr {

struct RecordedRun {
  int64_t id = 0;
  std::string started_at;
  std::optional<std::string> finished_at;  ///< nullopt: incomplete (the recorder died)
  std::optional<int> exit_code;
  std::string backend, mode, placement, worker;
  std::vector<std::pair<std::string, std::string>> environment;
};

struct RecordedCase {
  int64_t id = 0;      ///< test_case.id: what cpreplay --case takes
  int64_t run_id = 0;
  CaseInstance instance;
};

struct RecordedExecution {
  int64_t id = 0;
  int64_t case_id = 0;
  ExecutionResult result;  ///< ranks carry outcome, error, tails and captures (probes, outputs)
};

class RecordReader {
 public:
  /// Opens the database read-only; throws UsageError for a missing, foreign or corrupt file.
  explicit RecordReader(const std::string& path);

  std::vector<RecordedRun> runs() const;
  RecordedRun run(int64_t id) const;
  /// Every case of every run, in id order.
  std::vector<RecordedCase> cases() const;
  /// Throws UsageError "no case N in PATH; cpreplay --list shows the cases" for an unknown id.
  RecordedCase find_case(int64_t id) const;
  /// The case's executions in id order, each with per-rank results and captures.
  std::vector<RecordedExecution> executions(int64_t case_id) const;
  /// For a pooled execution: the cases that ran before it in the same world, in order.
  std::vector<RecordedCase> predecessors(const RecordedExecution& execution) const;

 private:
  RecordedCase read_case(const Statement& st) const;
  void read_ranks(int64_t execution, ExecutionResult& result) const;
  void read_captures(int64_t execution, std::vector<RankReport>& ranks) const;

  Database db_;
};

}  // namespace cprr

#pragma once
// cpreplay --all: triage a run. Every case of the run that failed, diverged or got a verdict at
// record time (the judgement cprecord made, re-made from the logs) is replayed as `--case` would
// replay it; one row per case says its verdict, where, and how many replays it took. Bounded by a
// replay budget: cases past it are listed as not replayed.
#include <cstdint>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "replayer/replay.h"

namespace cprr {

struct TriageOptions {
  ReplayOptions replay;           ///< db, mode, worker, timeout, Ctrl-C (case_id is ignored)
  std::optional<int64_t> run_id;  ///< default: the latest run
  int max_replays = 200;          ///< no case starts once this many replays ran
};

/// Where the executions that missed their expectation ran, against where the others ran
/// (ExecutionResult::devices, which cprecord --jobs records).
struct Places {
  std::set<std::string> failing, passing;
  void add(const ExecutionResult& r) { (r.as_expected ? passing : failing).insert(r.devices); }
  /// The one place every failing execution ran on when no passing one ran there (a bad device);
  /// "" when they failed in several places, where others passed too, or were not placed.
  std::string only_on() const;
};

struct TriageRow {
  RecordedCase recorded;
  std::string why;  ///< why it was picked: "failed", "fresh and pooled differ", a verdict, ...
  std::optional<ReplayReport> report;  ///< nullopt: not replayed (budget spent)
  /// The verdict the case is expected to get: its seeded bug, else reproduced (or crash/hang
  /// for a fault fixture expecting that).
  std::string expected;
  /// The place (ExecutionResult::devices) every recorded execution of the case that missed its
  /// expectation ran on, when its executions elsewhere met it: "fails only on gpus GPU-...".
  std::string only_on;
  bool as_expected() const;
  /// One line: where the verdict points (the race, allocation, divergence, polluters).
  std::string where() const;
};

struct Triage {
  int64_t run_id = 0;
  std::size_t cases_in_run = 0;
  std::vector<TriageRow> rows;
  int replays = 0;
  /// The run's case files or worker that changed since the record (ReplayReport::code_changes).
  std::vector<std::string> code_changes;
  /// The one place every execution of the run that missed its expectation ran on, when
  /// executions elsewhere met theirs (cprecord --jobs records places): "" otherwise.
  std::string only_on;
  /// 0 every triaged case got its expected verdict; 1 otherwise (or some were not replayed).
  int exit_code() const;
};

/// Picks and replays. Throws UsageError for a bad --db or --run.
Triage triage_run(const TriageOptions& options, ReplayProgress progress = nullptr,
                  void* user = nullptr);

void print_triage_text(std::ostream& out, const Triage& t);
void print_triage_json(std::ostream& out, const Triage& t);

}  // namespace cprr

#pragma once
// cprecord's plan: what run_record resolves from its options before anything runs (the worker
// and its arguments, the backend, the modes, the selection, the shuffle seed, the placement),
// every check made in the order a user meets them, and the cases the worker's catalog gives.
#include <cstdint>
#include <optional>
#include <ostream>
#include <regex>
#include <string>
#include <vector>

#include "commands/record_command.h"
#include "data/case_info.h"
#include "data/execution.h"
#include "recorder/engine/plan.h"
#include "runtime/placement.h"

namespace cprr {

// What run_record resolves from its options before anything runs, every check made in the
// order a user meets them.
struct RecordSetup {
  std::string worker;
  std::vector<std::string> worker_args;
  /// The code the cases come from (run.code): the case files the catalog names, or the worker.
  std::vector<std::string> code;
  BackendKind backend = BackendKind::cpu;
  std::vector<Mode> modes;
  std::optional<std::regex> filter;
  Selection selection;
  std::optional<uint64_t> shuffle_seed;
  Placement placement = Placement::best_fit;
  std::string plan_hash;  ///< of the plan before --shard (run.plan_hash)
};

/// Resolves and checks `o` (UsageError naming the option on bad input); runs nothing.
RecordSetup resolve(const RecordOptions& o);

/// The cases to run: the worker's catalog as --filter, --exclude, --shard and --rerun-failed
/// select it (sets s.code, s.plan_hash and the selection's shards); nullopt when there is nothing
/// to do, which is said on `err` and is no failure. Empty: a --shard that holds no case.
std::optional<std::vector<CaseInstance>> plan_of(const RecordOptions& o, RecordSetup& s,
                                                 std::ostream& err);

/// --list: the plan, as text or one JSON document.
void print_plan(std::ostream& out, const std::vector<CaseInstance>& plan, bool json);

/// `path` made absolute (as given when that fails).
std::string absolute(const std::string& path);

}  // namespace cprr

#pragma once
// cprecord --merge: the runs of several databases (the shards of one plan, recorded by
// `cprecord --shard I/N` jobs, or one plan's runs on several hosts) into one run of one file.
//
// The merged run holds every shard's cases, numbered by their place in the shared plan, with the
// judgement each shard stored; each shard's run is copied beside it (run.merged_into names the
// merged run) and keeps its executions, so a pooled execution's world and pool position still
// name the cases that ran before it in that process. Everything cpreplay and --rerun-failed read
// of a run works on the merged one.
//
// Crash-safe and idempotent: each shard is copied in one transaction, and a shard whose run.uid
// the file already holds is skipped, so a merge cut short is finished by running it again, and a
// merge run twice changes nothing. A merge adds to the merged run that holds one of the shards
// given (given again with the ones it lacked); else it makes a new merged run, so one file can
// keep a merged run per night of one plan. The merged run is incomplete (finished_at NULL) until
// every shard given is in.
#include <cstdint>
#include <string>
#include <vector>

namespace cprr {

struct MergedShard {
  std::string path;        ///< the input file
  int64_t source_run = 0;  ///< its run in that file
  int64_t run = 0;         ///< the copy's id in the merged file
  std::string shard;       ///< "I/N" ("1/1" for a run of the whole plan)
  int64_t cases = 0;
  bool already = false;  ///< the file held it already (its uid): nothing copied
};

struct MergeResult {
  int64_t run = 0;                  ///< the merged run
  std::vector<MergedShard> shards;  ///< in the order given
  uint32_t shard_count = 1;
  std::vector<std::string> missing;  ///< shards of the plan that no merge has brought, "3/4"
  int exit_code = 0;  ///< stored as the merged run's: the worst shard's, 1 when shards are missing
};

/// Merges the latest run (not itself a merge) of each file of `inputs` into `out` (created when
/// missing), recording `argv` as the merged run's command line. Throws UsageError, naming the
/// file and what to do, for: an input missing, of another schema version, holding no finished
/// run, or whose latest run is a merge itself; runs of different backends, modes, code (file
/// names and content hashes) or plans (run.plan_hash); runs split differently (shard counts,
/// by label or --by-time); two runs of one shard; a case in two shards (the merged run's shards
/// included). Nothing is written to `out` before every input passed.
MergeResult merge_runs(const std::string& out, const std::vector<std::string>& inputs,
                       const std::vector<std::string>& argv);

}  // namespace cprr

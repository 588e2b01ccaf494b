#pragma once
// Planning: a worker's catalog expanded into case instances (case x grid point x world size),
// filtered. An instance is what cprecord runs and what the recorder will store as a "case".
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "data/capture.h"
#include "data/case_info.h"
#include "data/shard.h"
#include "recorder/protocol/protocol.h"

namespace cprr {

/// Expands every case over its grid and world sizes, in catalog order, keeping instances whose
/// label matches `filter` (regex search). Ids are assigned after filtering.
std::vector<CaseInstance> expand(const Catalog& catalog, const std::optional<std::regex>& filter);

// cprecord --shard I/N (data/shard.h): an instance belongs to shard `1 + seed % count`, its seed
// being a hash of its label, so a case stays in its shard whatever else the catalog or the
// filters hold, and the shards of one plan are disjoint and cover it (or, with --by-time, the
// shard shards_by_time gives it).

/// What the command line narrows a plan to, after --filter: instances whose label matches
/// `exclude` (regex search) are dropped, then those outside `labels`; the rest are renumbered
/// 1..n, and then those outside `shard` are dropped, so a shard's ids are positions in the plan
/// all the shards share (a merge of the shards numbers its cases as one run would).
struct Selection {
  std::optional<std::regex> exclude;
  Shard shard;
  /// Only instances with these labels (cprecord --rerun-failed); nullopt: no such limit.
  std::optional<std::set<std::string>> labels;
  /// cprecord --by-time: the shard of each label (shards_by_time), in place of the label's hash.
  std::optional<std::map<std::string, uint32_t>> shard_of;
};
/// The plan before --shard: `plan` less `exclude` and outside `labels`, renumbered 1..n.
std::vector<CaseInstance> narrow(std::vector<CaseInstance> plan, const Selection& selection);
/// narrow(), then only the instances of `selection.shard`.
std::vector<CaseInstance> select(std::vector<CaseInstance> plan, const Selection& selection);

/// cprecord --shard I/N --by-time DB: splits `plan` into `count` shards of about equal recorded
/// time. Longest first, each case goes to the shard with the least time so far (the lowest index
/// on a tie); a case with no recorded time counts the median of those with one (1 ms when none
/// has). Every job given the same record and plan computes the same split. Label -> 1-based shard.
std::map<std::string, uint32_t> shards_by_time(const std::vector<CaseInstance>& plan,
                                               const std::map<std::string, double>& wall_ms,
                                               uint32_t count);

/// run.plan_hash: XXH3-64 as 16 hex digits of the plan before --shard (each instance's label and
/// expectation, in order), `mode` and `repeat`: equal for every shard of one cprecord command.
std::string plan_hash(const std::vector<CaseInstance>& plan, std::string_view mode, int repeat);

/// cprecord --shuffle: the order in which repeat `repeat` (0-based) runs a plan of `n` cases, a
/// permutation of 0..n-1 drawn from `seed` alone (its own generator, not the standard library's
/// unspecified distributions), so a seed gives the same order on every build and machine. Each
/// repeat gets its own order.
std::vector<std::size_t> shuffled_order(std::size_t n, uint64_t seed, int repeat);

/// Parses --shuffle's value: a decimal seed from 0 to kMaxSeed (it is stored as a SQLite
/// integer and printed for reuse); nullopt for anything else.
std::optional<uint64_t> parse_shuffle_seed(const std::string& text);

/// The catalog of the worker binary at `worker` (spawned with `worker_args`, then --catalog).
/// Throws cprr::Error naming the worker and what went wrong (not found, not a cprr worker,
/// crashed).
Catalog fetch_catalog(const std::string& worker, const std::vector<std::string>& worker_args = {});

}  // namespace cprr

#pragma once
// Planning: a worker's catalog expanded into case instances (case x grid point x world size),
// filtered. An instance is what cprecord runs and what the recorder will store as a "case".
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "recorder/capture.h"
#include "recorder/case_info.h"
#include "recorder/protocol.h"

namespace cprr {

/// Seeds stay below 2^53: JSON consumers (jq, JavaScript) read numbers as doubles, and the store's
/// INTEGER column then holds them as plain positive numbers.
inline constexpr uint64_t kMaxSeed = (uint64_t{1} << 53) - 1;

struct CaseInstance {
  uint32_t id = 0;        ///< 1-based position in the plan
  CaseInfo info;
  Params params;
  int world_size = 1;
  uint64_t seed = 0;      ///< from the label: stable across runs and machines; <= kMaxSeed
  /// "name{k=v,k2=v2}@w" (the braces only when there are parameters). Filters match this.
  std::string label() const;
};

/// Expands every case over its grid and world sizes, in catalog order, keeping instances whose
/// label matches `filter` (regex search). Ids are assigned after filtering.
std::vector<CaseInstance> expand(const Catalog& catalog, const std::optional<std::regex>& filter);

/// The catalog of the worker binary at `worker` (spawned with --catalog). Throws cprr::Error
/// naming the worker and what went wrong (not found, not a cprr worker, crashed).
Catalog fetch_catalog(const std::string& worker);

}  // namespace cprr

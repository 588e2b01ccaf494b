#pragma once
// Planning: a worker's catalog expanded into case instances (case x grid point x world size),
// filtered. An instance is what cprecord runs and what the recorder will store as a "case".
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "recorder/data/capture.h"
#include "recorder/data/case_info.h"
#include "recorder/protocol/protocol.h"

namespace cprr {

/// Expands every case over its grid and world sizes, in catalog order, keeping instances whose
/// label matches `filter` (regex search). Ids are assigned after filtering.
std::vector<CaseInstance> expand(const Catalog& catalog, const std::optional<std::regex>& filter);

/// The catalog of the worker binary at `worker` (spawned with --catalog). Throws cprr::Error
/// naming the worker and what went wrong (not found, not a cprr worker, crashed).
Catalog fetch_catalog(const std::string& worker);

}  // namespace cprr

#pragma once
// cpreplay --list: the runs and cases a database holds, with each case's recorded statuses and
// whether its fresh and pooled executions differ (the cases worth replaying first), judged by the
// same function as cprecord (analysis/judgement.h), so the two tools agree on every database.
#include <ostream>
#include <string>

namespace cprr {

/// Prints the runs and cases of `db` as a table, or as one JSON document with `json`.
void list_db(std::ostream& out, const std::string& db, bool json);

}  // namespace cprr

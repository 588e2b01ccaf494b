#pragma once
// cprecord --merge: the databases of a sharded run (or of one plan's runs on several hosts)
// merged into one run (schema/store_merge.h), then reported as cprecord reports a run it ran:
// the table or --json on stdout, --junit, and the exit code scripts read.
#include <ostream>
#include <string>
#include <vector>

#include "commands/record_command.h"

namespace cprr {

/// Merges `o.merge` into `o.db` and reports the merged run. Only --db, --json and --junit shape
/// a merge; an option that selects or runs cases is refused (UsageError). Returns the merged
/// run's exit code: 0 every case as expected and every shard merged, 1 a case not as expected or
/// a shard missing, 2 an infrastructure error in a shard.
int run_merge(const RecordOptions& o, std::ostream& out, std::ostream& err, bool color,
              const std::vector<std::string>& argv);

}  // namespace cprr

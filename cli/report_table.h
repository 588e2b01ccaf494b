#pragma once
// The human-readable summary of a cprecord run: one row per execution (red only for those that
// count against the run), the divergences with their replay commands, and the tally.
#include <ostream>
#include <vector>

#include "cli/report.h"

namespace cprr {

void print_table(std::ostream& out, const std::vector<ExecutionResult>& results,
                 const std::vector<CaseOutcome>& outcomes, const RunInfo& info, bool color);

}  // namespace cprr

#pragma once
// Hang diagnosis: lining up the ranks' collective progress to name who never joined what.
#include <string>
#include <vector>

#include "data/execution.h"

namespace cprr {

/// One line explaining a hang from every rank's watchdog answer and collective log: which rank
/// never joined which collective, and what the others were doing. Pure: reads only the reports.
std::string diagnose_hang(const std::vector<RankReport>& ranks);

}  // namespace cprr

#pragma once
// Hang diagnosis: lining up the ranks' collective progress to name who never joined what.
#include <string>
#include <vector>

#include "data/execution.h"

namespace cprr {

/// One line explaining a hang from every rank's watchdog answer and collective log: which rank
/// never joined which collective, and what the others were doing. Pure: reads only the reports.
std::string diagnose_hang(const std::vector<RankReport>& ranks);

/// What the ranks without a result were doing when a failure of rank `failed` ended the case
/// (classify's `released`), from their watchdogs' answers: "rank 0 was in body (waiting in
/// collective #1 all_reduce, which rank 1 never entered) when rank 1 failed; ended with its
/// world". Empty when every rank reported.
std::string describe_released(const std::vector<RankReport>& ranks, int failed);

}  // namespace cprr

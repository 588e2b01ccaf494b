#pragma once
// The one table of text forms for the record's enums: what the store, the JSON documents, the
// tables and the command lines say. Each enum has one name table; naming and parsing both read
// it, so a word cannot be spelled two ways.
#include <optional>
#include <string_view>
#include <vector>

#include "data/case_info.h"
#include "data/execution.h"
#include "data/launch_options.h"

namespace cprr {

std::string_view expect_name(Expect e);
std::optional<Expect> parse_expect(std::string_view s);

std::string_view mode_name(Mode m);  ///< fresh | pool
std::optional<Mode> parse_mode(std::string_view s);
/// A run's modes as --mode and run.mode say them: fresh | pool | both (fresh, then pool).
std::string_view modes_name(const std::vector<Mode>& modes);
std::optional<std::vector<Mode>> parse_modes(std::string_view s);

std::string_view status_name(ExecStatus s);  ///< pass | fail | crash | hang | error
std::optional<ExecStatus> parse_status(std::string_view s);

std::string_view outcome_name(RankOutcome o);  ///< ok | fail | error
std::optional<RankOutcome> parse_outcome(std::string_view s);

std::string_view launcher_name(LauncherKind k);  ///< local | mpirun | srun
std::optional<LauncherKind> parse_launcher(std::string_view s);

/// A rank's outcome as stored and printed: its RankOutcome's name when it reported, else "died"
/// (it exited) or "no_result" (it was killed while silent).
std::string_view report_outcome_name(const RankReport& r);

}  // namespace cprr

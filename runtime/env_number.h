#pragma once
// Whole numbers cprr reads from the environment (a launcher's rank, Slurm's node count, a port,
// an arena size): one rule for all of them, so a wrong setting is never read as "unset" by one
// reader and refused by the next.
#include <optional>
#include <string_view>

namespace cprr {

/// The whole number that environment variable `name` holds, from `lo` to `hi`; nullopt when it is
/// unset or empty. Any other text (not a number, trailing characters, out of range) is a
/// UsageError naming the variable, its value and `what` it must be ("a rank number").
std::optional<long long> env_number(const char* name, long long lo, long long hi,
                                    std::string_view what);

}  // namespace cprr

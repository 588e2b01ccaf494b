#pragma once
// Command-line pieces cprecord and cpreplay share, so both tools reject bad values with the same
// words and both answer --version.
#include <CLI/CLI.hpp>
#include <string_view>

namespace cprr {

/// --timeout: a finite number of seconds in (0, kMaxTimeoutS]; NaN, infinities, zero and
/// negatives are refused with "must be a positive number of seconds".
CLI::Validator seconds_validator();

/// --repeat and similar counts: a whole number of at least 1.
CLI::Validator positive_count_validator();

/// `--version`: prints "<tool> <version>" and exits 0; shows every option's default in --help.
void add_common_flags(CLI::App& app, std::string_view tool);

}  // namespace cprr

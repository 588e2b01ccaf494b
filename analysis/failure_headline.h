#pragma once
// The one line a report shows for a rank's failure: a Python traceback's exception line (its last
// line, where the exception is, not its first, "Traceback (most recent call last):") with the
// place it was raised; any other text's first line. The whole text stays in the rank's result
// (the store, --json, JUnit's body): the headline is for the places with room for one line.
#include <string>
#include <string_view>

namespace cprr {

/// `error` (a rank's RankResult::error) as one line. A Python traceback gives its exception line
/// and the innermost frame outside installed packages and the standard library, as
/// "ValueError: bad shape (test_model.py:12)"; a chained traceback gives the exception that
/// ended the case (the last). Other text gives its first non-empty line, with " ..." when more
/// lines follow.
std::string failure_headline(std::string_view error);

}  // namespace cprr

#pragma once
// JUnit XML for CI test reporters (Jenkins, GitLab, GitHub): `cprecord --junit PATH`. Every
// execution (case instance x mode x repeat) is one <testcase>; one that met its case's
// expectation passes, one that did not carries a <failure> (fail/crash/hang/unexpected pass) or an
// <error> (infrastructure) with each rank's outcome, error, exit and output tails.
#include <ostream>
#include <string>
#include <vector>

#include "recorder/controller.h"
#include "recorder/plan.h"

namespace cprr {

/// Writes JUnit XML: one <testsuite name="cprr"> with one <testcase> per execution. Any bytes
/// (control characters, invalid UTF-8) in summaries and tails are replaced, so it always parses.
void write_junit(std::ostream& out, const std::vector<CaseInstance>& plan,
                 const std::vector<ExecutionResult>& results, double wall_s);

/// Writes the same to `path` crash-safely (a temp file in the same directory, fsync, rename).
/// Throws UsageError naming the path when it cannot be written ("--junit PATH: ...").
void write_junit_file(const std::string& path, const std::vector<CaseInstance>& plan,
                      const std::vector<ExecutionResult>& results, double wall_s);

}  // namespace cprr

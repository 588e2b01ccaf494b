#pragma once
// JUnit XML for CI test reporters (Jenkins, GitLab, GitHub): `cprecord --junit PATH`. Every
// execution (case instance x mode x repeat) is one <testcase>; one that counts against the run
// (analysis/judgement.h) carries a <failure> (a missed expectation, a fresh-vs-pooled divergence,
// varying outputs) or an <error> (infrastructure) with each rank's outcome, error, exit and output
// tails; every other one passes, an expected failure saying what was expected.
#include <ostream>
#include <string>
#include <vector>

#include "cli/report.h"

namespace cprr {

/// Writes JUnit XML: one <testsuite name="cprr"> with one <testcase> per execution of the plan.
/// A testcase fails exactly when its execution counts against the exit code (CaseOutcome::against:
/// a missed expectation, a fresh-vs-pooled divergence with its cpreplay command, outputs varying
/// across repeats); an expected failure passes and says what was expected in <system-out>. Any
/// bytes (control characters, invalid UTF-8) in summaries and tails are replaced, so it always
/// parses.
void write_junit(std::ostream& out, const std::vector<CaseOutcome>& outcomes,
                 const std::vector<ExecutionResult>& results, const RunInfo& info);

/// Writes the same to `path` crash-safely (runtime/atomic_file.h). Throws UsageError naming the
/// path when it cannot be written ("--junit PATH: ..."); check_file_target("--junit", path)
/// finds that before a run.
void write_junit_file(const std::string& path, const std::vector<CaseOutcome>& outcomes,
                      const std::vector<ExecutionResult>& results, const RunInfo& info);

}  // namespace cprr

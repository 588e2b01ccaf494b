#pragma once
// The store's own record vocabulary, shared by schema/record_writer.h and schema/record_reader.h:
// what the codec writes and reads back that data/ has no type or text form for.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cprr {

/// What a run concluded about one case over all its executions (modes x repeats): the columns
/// test_case.verdict, as_expected and fresh_vs_pool. Written once at the end of the run, so a
/// query needs no join over the executions to find the cases that went wrong.
struct CaseJudgement {
  int64_t case_id = 0;  ///< test_case.id (RecordWriter::add_cases returned it)
  /// crash | hang | nondeterministic: the verdict decidable at record time; nullopt: none.
  std::optional<std::string> verdict;
  bool as_expected = false;  ///< nothing counted against cprecord's exit code
  /// One line: the first divergence of a pooled execution from the fresh one (hashes or
  /// completion); nullopt: none, or the run did not use both modes.
  std::optional<std::string> fresh_vs_pool;

  bool operator==(const CaseJudgement&) const = default;
};

/// capture.kind: which of CaseCapture's lists a capture row belongs to.
inline constexpr std::string_view kProbeKind = "probe";
inline constexpr std::string_view kOutputKind = "output";

}  // namespace cprr

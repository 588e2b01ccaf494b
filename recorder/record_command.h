#pragma once
// The cprecord verb: run the registered cases of a worker, fresh or pooled, and report.
#include <optional>
#include <ostream>
#include <string>

namespace cprr {

struct RecordOptions {
  std::string worker;          ///< empty: the cpworker next to this executable
  std::string backend = "auto";
  std::string mode = "pool";   ///< pool | fresh
  std::string filter;          ///< regex searched in "name{params}@w"; empty: all
  int repeat = 1;
  std::optional<double> timeout_s;
  std::string placement = "best_fit";  ///< allocator policy for every execution
  bool json = false;
  bool list = false;           ///< print the plan and exit
};

/// Runs the verb in-process: what the binary does after parsing. `progress` enables the TTY
/// progress line on `err`; `color` enables colour in the table. Returns the exit code.
int run_record(const RecordOptions& options, std::ostream& out, std::ostream& err, bool progress,
               bool color);

/// The cprecord main: parses argv (CLI11), then run_record.
int record_main(int argc, char** argv);

}  // namespace cprr

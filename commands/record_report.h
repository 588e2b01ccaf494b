#pragma once
// cprecord's end of a run: the judgements and exit code stored, then the JUnit file, the traces
// and the report (JSON or the table).
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "commands/record_plan.h"
#include "commands/record_run.h"
#include "schema/record_writer.h"

namespace cprr {

// A run as it ended: what run_plan executed of the plan, in the store as `writer`'s run.
struct Ran {
  const std::vector<CaseInstance>& plan;
  const std::vector<int64_t>& case_ids;
  const PlanRun& executed;
  std::chrono::steady_clock::time_point t0;
};

/// The run's end as above. Returns the exit code.
int finish_run(const RecordOptions& o, const RecordSetup& s, const Ran& ran, RecordWriter& writer,
               std::ostream& out, std::ostream& err, bool color);

/// --trace DIR: made (or found) before the run spends anything; UsageError when it cannot be.
void prepare_trace_dir(const std::string& dir);

}  // namespace cprr

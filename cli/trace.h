#pragma once
// A timeline of one execution as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open: `cprecord --trace DIR` and `cpreplay --case N --trace FILE`.
//
//   process per rank ("rank 0"), thread per stream ("stream 1") plus "host" (tid 0);
//   ops: complete events ("X") with their real start and duration (CaseCapture::timeline);
//   collectives: the same collective on every rank joined by one flow ("s" -> "t" ... -> "f");
//   allocations and frees: instant events ("i") on the host track;
//   races (analysis/race_check.h): the racing pair joined by a flow named as the race.
//
// Times are microseconds from the earliest rank's case start. Ranks that left no result (a crash,
// a hang) have no track; an op whose stream never reached it has no event.
#include <string>

#include "data/execution.h"

namespace cprr {

/// True when some rank's capture holds a timeline (the execution ran with timing on).
bool has_timeline(const ExecutionResult& e);

/// The trace document of `e` (a JSON object with "traceEvents"), as text.
std::string trace_json(const ExecutionResult& e);

/// Writes trace_json(e) to `path` crash-safely (runtime/atomic_file.h); errors name `option`.
void write_trace_file(const char* option, const std::string& path, const ExecutionResult& e);

}  // namespace cprr

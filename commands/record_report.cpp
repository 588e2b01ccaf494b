#include "commands/record_report.h"

#include <fmt/format.h>
#include <string.h>

#include <filesystem>

#include "analysis/judgement.h"
#include "analysis/verdict.h"
#include "cli/junit.h"
#include "cli/report.h"
#include "cli/report_table.h"
#include "cli/trace.h"
#include "data/text_forms.h"
#include "recorder/engine/launcher.h"
#include "recorder/launch/interrupt.h"
#include "runtime/atomic_file.h"
#include "runtime/error.h"

namespace cprr {
namespace {

// The judgement as the store keeps it on each case row, so a query needs no join over executions.
std::vector<CaseJudgement> judgements_of(const std::vector<CaseOutcome>& outcomes) {
  std::vector<CaseJudgement> out;
  for (const CaseOutcome& o : outcomes) {
    CaseJudgement j;
    j.case_id = o.case_id;
    if (o.verdict) j.verdict = std::string(verdict_name(*o.verdict));
    j.as_expected = o.as_expected;
    if (o.differential) j.fresh_vs_pool = o.differential->describe();
    out.push_back(std::move(j));
  }
  return out;
}

// The run's last rows: every case's judgement (none when a signal cut the run short: a case
// stopped after its fresh half would look complete), then the exit code that finishes it, which
// for an interrupted run is the shell's 128 + signal. Returns that code.
int close_run(RecordWriter& writer, const std::vector<CaseOutcome>& outcomes, int signal,
              const std::optional<std::string>& stopped, std::size_t ran, std::size_t planned,
              std::ostream& err) {
  const int code = signal != 0 ? 128 + signal : exit_code_for(outcomes);
  if (signal == 0) writer.judge_cases(judgements_of(outcomes));
  writer.finish(code, signal == 0 ? stopped : std::nullopt);
  if (signal == 0 && stopped) {
    err << fmt::format(
        "cprecord: stopped by {} after {} of {} executions; run {} is recorded "
        "as stopped there\n",
        *stopped, ran, planned, writer.run_id());
  }
  if (signal != 0) {
    err << fmt::format(
        "cprecord: interrupted by SIG{} after {} of {} executions; run {} is "
        "recorded with exit code {}\n",
        sigabbrev_np(signal), ran, planned, writer.run_id(), code);
  }
  return code;
}

// The executions worth a timeline: every one of each case with a verdict or not as expected.
// Returns how many trace files were written.
std::size_t write_traces(const std::string& dir, const std::vector<CaseOutcome>& outcomes) {
  std::size_t written = 0;
  for (const CaseOutcome& o : outcomes) {
    if (o.as_expected && !o.verdict) continue;
    for (const ExecutionResult* e : o.executions) {
      if (!has_timeline(*e)) continue;
      const std::string name =
          fmt::format("case-{}-{}-{}.json", o.case_id, mode_name(e->mode), e->attempt);
      write_trace_file("--trace", (std::filesystem::path(dir) / name).string(), *e);
      ++written;
    }
  }
  return written;
}

}  // namespace

// --trace DIR: the directory must exist or be creatable before the run spends anything.
void prepare_trace_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    CPRR_THROW_AS(UsageError, "--trace {}: cannot make this directory: {}", dir,
                  ec ? ec.message() : "a file of that name exists");
  }
  check_file_target("--trace", (std::filesystem::path(dir) / "case-0-fresh-1.json").string());
}

// The run's end: its judgements and exit code stored, then the JUnit file, the traces and the
// report (JSON or the table). Returns the exit code.
int finish_run(const RecordOptions& o, const RecordSetup& s, const Ran& ran, RecordWriter& writer,
               std::ostream& out, std::ostream& err, bool color) {
  const std::vector<ExecutionResult>& results = ran.executed.results;
  const int signal = o.shared.interrupt != nullptr ? o.shared.interrupt->signal() : 0;
  const auto outcomes = summarize(ran.plan, ran.case_ids, results);
  const std::size_t planned = ran.plan.size() * s.modes.size() * static_cast<std::size_t>(o.repeat);
  const int code =
      close_run(writer, outcomes, signal, ran.executed.stopped, results.size(), planned, err);
  const RunInfo info{
      writer.run_id(),
      absolute(o.db),
      o.db,
      s.worker,
      s.backend,
      o.mode,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - ran.t0).count(),
      code,
      ran.executed.stopped,
      s.shuffle_seed,
      describe(o.launch),
      signal};
  if (!o.junit.empty()) write_junit_file(o.junit, outcomes, results, info);
  const std::string& trace_dir = o.shared.trace;
  if (!trace_dir.empty()) {
    const std::size_t traces = write_traces(trace_dir, outcomes);
    err << (traces == 0 ? fmt::format("cprecord: no trace written to {}: every case was as "
                                      "expected with no finding (cpreplay --case N --trace FILE "
                                      "draws any case)\n",
                                      trace_dir)
                        : fmt::format("cprecord: wrote {} trace(s) to {} (open them in "
                                      "https://ui.perfetto.dev or chrome://tracing)\n",
                                      traces, trace_dir));
  }
  if (o.json) {
    print_json(out, outcomes, info);
  } else {
    print_table(out, results, outcomes, info, color);
  }
  return code;
}

}  // namespace cprr

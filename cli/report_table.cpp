#include "cli/report_table.h"

#include <fmt/format.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "analysis/classify.h"

namespace cprr {
namespace {

std::string paint(bool color, const char* code, std::string_view text) {
  return color ? fmt::format("\033[{}m{}\033[0m", code, text) : std::string(text);
}

// Red only for an execution that counts against the exit code; an expected failure (a fault
// fixture, a seeded bug's pooled run) is yellow.
std::string status_cell(const ExecutionResult& e, bool counts_against, bool color) {
  const std::string s = fmt::format("{:<6}", status_name(e.status));
  if (counts_against) return paint(color, "1;31", s);
  return paint(color, e.status == ExecStatus::pass ? "32" : "33", s);
}

std::string duration(double ms) {
  return ms < 1000 ? fmt::format("{:.1f} ms", ms) : fmt::format("{:.2f} s", ms / 1000);
}

// The executions that took longest (world start-up included), where a suite's time goes.
void print_slowest(std::ostream& out, const std::vector<ExecutionResult>& results) {
  constexpr std::size_t kShown = 5;
  if (results.size() < 2) return;
  std::vector<const ExecutionResult*> by_time;
  for (const ExecutionResult& e : results) by_time.push_back(&e);
  const std::size_t n = std::min(kShown, by_time.size());
  std::partial_sort(by_time.begin(), by_time.begin() + n, by_time.end(),
                    [](const auto* a, const auto* b) { return a->wall_ms > b->wall_ms; });
  out << "slowest:";
  for (std::size_t i = 0; i < n; ++i) {
    const ExecutionResult& e = *by_time[i];
    out << fmt::format("{} {} {} {}", i == 0 ? "" : ",", e.label, mode_name(e.mode),
                       duration(e.wall_ms));
  }
  out << '\n';
}

// Where the worlds' start time went: the median start and its largest steps (--json has each
// world's); fresh mode's cost is mostly this.
void print_world_starts(std::ostream& out, const std::vector<ExecutionResult>& results) {
  constexpr std::size_t kShown = 3;
  std::vector<double> totals;
  std::map<std::string, std::vector<double>> steps;
  for (const ExecutionResult& e : results) {
    if (e.startup_phases.empty()) continue;
    totals.push_back(total_ms(e.startup_phases));
    for (const StartupPhase& p : e.startup_phases) steps[p.name].push_back(p.ms);
  }
  if (totals.empty()) return;
  const auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  std::vector<std::pair<double, std::string>> largest;
  for (auto& [name, ms] : steps) largest.emplace_back(median(ms), name);
  const std::size_t n = std::min(kShown, largest.size());
  std::partial_sort(largest.begin(), largest.begin() + static_cast<std::ptrdiff_t>(n),
                    largest.end(), std::greater<>());
  out << fmt::format("world starts: {} world{}, median {}:", totals.size(),
                     totals.size() == 1 ? "" : "s", duration(median(totals)));
  for (std::size_t i = 0; i < n; ++i) {
    out << fmt::format("{} {} {}", i == 0 ? "" : ",", largest[i].second,
                       duration(largest[i].first));
  }
  out << " (each world's steps: --json startup_phases)\n";
  std::vector<double> first_use;
  for (const ExecutionResult& e : results) {
    if (!e.first_use_phases.empty()) first_use.push_back(total_ms(e.first_use_phases));
  }
  if (!first_use.empty()) {
    out << fmt::format(
        "start-up left to first use: paid inside {} execution{}, median {} (--json "
        "first_use_phases)\n",
        first_use.size(), first_use.size() == 1 ? "" : "s", duration(median(first_use)));
  }
}

// The whole traceback (or multi-line message) of the rank each failing case's summary names,
// once per case: the table's note has room for its last line only.
void print_tracebacks(std::ostream& out, const std::vector<ExecutionResult>& results,
                      const std::map<uint32_t, const CaseOutcome*>& by_case) {
  std::set<uint32_t> shown;
  for (const ExecutionResult& e : results) {
    const CaseOutcome& o = *by_case.at(e.case_id);
    if (o.against.count(e.id) == 0 || shown.count(e.case_id) != 0) continue;
    const std::optional<FailureText> failure = failure_beyond_summary(e.ranks);
    if (!failure) continue;
    shown.insert(e.case_id);
    out << fmt::format("case {} ({}): rank {} in the {} execution {}:\n", o.case_id, e.label,
                       failure->rank, mode_name(e.mode), e.id);
    std::istringstream lines(failure->text);
    for (std::string line; std::getline(lines, line);) out << "    " << line << '\n';
  }
}

}  // namespace

void print_table(std::ostream& out, const std::vector<ExecutionResult>& results,
                 const std::vector<CaseOutcome>& outcomes, const RunInfo& info, bool color) {
  std::size_t width = 4;
  for (const auto& e : results) width = std::max(width, e.label.size());
  out << fmt::format("{:>4}  {:<{}}  {:<5}  {:>3}  {:<6}  {:<6}  {:>9}  {}\n", "case", "label",
                     width, "mode", "try", "status", "expect", "time", "note");
  std::map<uint32_t, const CaseOutcome*> by_case;
  for (const auto& o : outcomes) by_case[o.instance->id] = &o;
  for (const auto& e : results) {
    const CaseOutcome* o = by_case[e.case_id];
    const std::string expect(expect_name(o->instance->info.options.expect));
    const bool against = o->against.count(e.id) != 0;
    out << fmt::format("{:>4}  {:<{}}  {:<5}  {:>3}  {}  {:<6}  {:>9}  {}\n", o->case_id, e.label,
                       width, mode_name(e.mode), e.attempt, status_cell(e, against, color), expect,
                       duration(e.wall_ms),
                       (e.summary.empty() ? e.note : e.summary).substr(0, 200));
  }
  std::map<ExecStatus, int> counts;
  for (const auto& e : results) ++counts[e.status];
  int unexpected = 0;
  for (const auto& o : outcomes) unexpected += o.as_expected ? 0 : 1;
  std::string tally;
  for (const auto& [s, n] : counts)
    tally += fmt::format("{}{} {}", tally.empty() ? "" : ", ", n, status_name(s));
  for (const auto& o : outcomes) {
    if (o.verdict == Verdict::nondeterministic) {
      out << fmt::format("case {} ({}): outputs differ between repeats: nondeterministic; {}\n",
                         o.case_id, o.instance->label(), replay_hint(info, o.case_id));
    }
    if (o.race) {
      const bool seeded_race = o.instance->info.options.seeded_bug == "stream_race";
      const bool candidate = o.race->race.candidate;
      out << fmt::format(
          "case {} ({}): stream race{}{}: {}; fix: {}; {}\n", o.case_id, o.instance->label(),
          candidate ? " candidate (an access of unknown direction: not counted until a replay "
                      "shows it)"
                    : "",
          seeded_race ? " (seeded bug, expected)" : "", describe_race(*o.race),
          describe_fix(o.race->race), replay_hint(info, o.case_id));
      for (const RaceFinding& other : o.race->others) {
        out << "  also: " << describe_other_race(other) << '\n';
      }
    }
    const std::string& seeded = o.instance->info.options.seeded_bug;
    if (o.allocation) {
      out << fmt::format("case {} ({}): allocator order{}: {}; {}\n", o.case_id,
                         o.instance->label(),
                         seeded == "allocator_order" ? " (seeded bug, expected)" : "",
                         o.allocation->mismatch.describe(), replay_hint(info, o.case_id));
    }
    if (o.uninitialized) {
      out << fmt::format("case {} ({}): uninitialized read{}: {}; {}\n", o.case_id,
                         o.instance->label(),
                         seeded == "uninitialized_read" ? " (seeded bug, expected)" : "",
                         o.uninitialized->mismatch.describe(), replay_hint(info, o.case_id));
      for (const UninitRead& more : o.more_uninitialized) {
        out << fmt::format("  also: {}\n", more.describe());
      }
    }
    if (o.collective_mismatch) {
      out << fmt::format("case {} ({}): collective mismatch{}: {}; {}\n", o.case_id,
                         o.instance->label(),
                         seeded == "collective_mismatch" ? " (seeded bug, expected)" : "",
                         o.collective_mismatch->mismatch.describe(), replay_hint(info, o.case_id));
    }
    for (const std::string& note : o.race_notes) {
      out << fmt::format("case {} ({}): race check weakened: {}\n", o.case_id, o.instance->label(),
                         note);
    }
    if (o.differential) {
      out << fmt::format("case {} ({}): fresh and pooled differ{}: {}; {}\n", o.case_id,
                         o.instance->label(),
                         seeded.empty() ? "" : " (seeded bug, expected " + seeded + ")",
                         o.differential->describe(), replay_hint(info, o.case_id));
    }
  }
  print_tracebacks(out, results, by_case);
  // An interrupted run judged nothing: "all as expected" would claim what was never run.
  const std::string verdict =
      info.signal != 0  ? paint(color, "1;33",
                                fmt::format("interrupted by SIG{}, {} unexpected before it",
                                            sigabbrev_np(info.signal), unexpected))
      : unexpected == 0 ? paint(color, "32", "all as expected")
                        : paint(color, "1;31", fmt::format("{} unexpected", unexpected));
  out << fmt::format("\n{} executions ({}), {} cases: {}; backend {}, mode {}{}, {:.2f} s\n",
                     results.size(), tally, outcomes.size(), verdict, backend_name(info.backend),
                     info.mode, info.launcher == "local" ? "" : ", launcher " + info.launcher,
                     info.wall_s);
  print_slowest(out, results);
  print_world_starts(out, results);
  if (info.shuffle_seed) {
    out << fmt::format("cases ran in an order shuffled with seed {}; --shuffle={} runs it again\n",
                       *info.shuffle_seed, *info.shuffle_seed);
  }
  if (info.run_id != 0) out << fmt::format("recorded as run {} in {}\n", info.run_id, info.db);
}

}  // namespace cprr

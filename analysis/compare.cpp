#include "analysis/compare.h"

#include "recorder/data/text_forms.h"

namespace cprr {

bool completed(const ExecutionResult& e) {
  return e.status == ExecStatus::pass || e.status == ExecStatus::fail;
}

std::vector<const CaseCapture*> captures_of(const ExecutionResult& e) {
  std::vector<const CaseCapture*> out;
  for (const RankReport& r : e.ranks) out.push_back(r.done ? &r.done->capture : nullptr);
  return out;
}

std::optional<Divergence> compare(const ExecutionResult& expected, const ExecutionResult& actual) {
  if (completed(expected) && completed(actual)) {
    if (auto d = first_divergence(captures_of(expected), captures_of(actual))) return d;
  }
  if (expected.status == actual.status) return std::nullopt;
  Divergence d;
  d.kind = "result";
  d.reason = "status";
  d.expected = std::string(status_name(expected.status));
  d.actual = std::string(status_name(actual.status));
  return d;
}

std::optional<Differential> fresh_vs_pool(const std::vector<const ExecutionResult*>& executions) {
  const ExecutionResult* fresh = nullptr;
  for (const ExecutionResult* e : executions) {
    if (e->mode == Mode::fresh && completed(*e)) {
      fresh = e;
      break;
    }
  }
  if (fresh == nullptr) return std::nullopt;
  for (const ExecutionResult* e : executions) {
    if (e->mode != Mode::pool || !completed(*e)) continue;
    if (auto d = compare(*fresh, *e)) return Differential{*d, e};
  }
  return std::nullopt;
}

}  // namespace cprr

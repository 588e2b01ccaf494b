#include "analysis/compare.h"

#include <fmt/format.h>

#include <algorithm>

#include "data/text_forms.h"

namespace cprr {

bool completed(const ExecutionResult& e) {
  return e.status == ExecStatus::pass || e.status == ExecStatus::fail;
}

std::vector<const CaseCapture*> captures_of(const ExecutionResult& e) {
  std::vector<const CaseCapture*> out;
  for (const RankReport& r : e.ranks) out.push_back(r.done ? &r.done->capture : nullptr);
  return out;
}

namespace {

std::optional<Divergence> compare_results(const ExecutionResult& expected,
                                          const ExecutionResult& actual) {
  if (completed(expected) && completed(actual)) {
    std::vector<const CaseCapture*> e = captures_of(expected), a = captures_of(actual);
    if (expected.status == ExecStatus::fail || actual.status == ExecStatus::fail) {
      // A rank left waiting on a failed one reports or is ended as timing has it (an NCCL call
      // returns at once when pooled, blocks connecting when fresh): compare what both reported.
      for (std::size_t r = 0; r < std::min(e.size(), a.size()); ++r) {
        if (e[r] == nullptr || a[r] == nullptr) e[r] = a[r] = nullptr;
      }
    }
    if (auto d = first_divergence(e, a)) return d;
  }
  if (expected.status == actual.status) return std::nullopt;
  Divergence d;
  d.kind = "result";
  d.reason = "status";
  d.expected = std::string(status_name(expected.status));
  d.actual = std::string(status_name(actual.status));
  return d;
}

}  // namespace

std::optional<Divergence> compare(const ExecutionResult& expected, const ExecutionResult& actual) {
  std::optional<Divergence> d = compare_results(expected, actual);
  // Reduction order changes a capture's bytes, never its size, its presence or a status.
  if (d && d->reason == "hash" && across_transports(expected, actual)) {
    d->transports = fmt::format("expected {}, got {}", expected.collectives, actual.collectives);
  }
  return d;
}

std::optional<Differential> fresh_vs_pool(const std::vector<const ExecutionResult*>& executions) {
  // Completed, or skipped: a case that skips in one mode only skipped on what the pooled world
  // kept (or lacked), which is a difference like any other.
  const auto comparable = [](const ExecutionResult& e) {
    return completed(e) || e.status == ExecStatus::skip;
  };
  // The fresh execution a pooled one is compared with: the first comparable one of its transport.
  const auto fresh_for = [&](const ExecutionResult& pooled) {
    const ExecutionResult* first = nullptr;
    for (const ExecutionResult* e : executions) {
      if (e->mode != Mode::fresh || !comparable(*e)) continue;
      if (!across_transports(*e, pooled)) return e;
      if (first == nullptr) first = e;
    }
    return first;
  };
  std::optional<Differential> across;  // reported only when no divergence within a transport
  for (const ExecutionResult* e : executions) {
    if (e->mode != Mode::pool || !comparable(*e)) continue;
    const ExecutionResult* fresh = fresh_for(*e);
    if (fresh == nullptr) return std::nullopt;
    if (auto d = compare(*fresh, *e)) {
      if (d->transports.empty()) return Differential{*d, e};
      if (!across) across = Differential{*d, e};
    }
  }
  return across;
}

}  // namespace cprr

#pragma once
// Comparing two executions: the one definition of "completed", "the captures of" and "differ"
// that cprecord's fresh-vs-pooled differential, cpreplay --case and cpreplay --list all use.
#include <optional>
#include <vector>

#include "analysis/divergence.h"
#include "data/execution.h"

namespace cprr {

/// Ran to completion on every rank (pass or fail): only then are its captures comparable.
bool completed(const ExecutionResult& e);

/// Each rank's captures, null for a rank that returned no result.
std::vector<const CaseCapture*> captures_of(const ExecutionResult& e);

/// How `actual` differs from `expected`: the first divergence of their captures when both
/// completed, else a "result"/"status" divergence when their statuses differ; nullopt when they
/// agree. A capture's bytes differing across transports (across_transports) names them in
/// Divergence::transports; a status, size or missing capture never does.
std::optional<Divergence> compare(const ExecutionResult& expected, const ExecutionResult& actual);

/// The fresh-vs-pooled differential of one case's executions.
struct Differential {
  Divergence divergence;
  const ExecutionResult* pooled = nullptr;  ///< the pooled execution that diverged
};

/// The first completed pooled execution that differs from the first completed fresh one of its
/// transport (else the first completed fresh one; see compare); nullopt when either mode has no
/// completed execution or none differs. A divergence within one transport is preferred to one
/// across transports (Divergence::transports set), which may be reduction order alone. A pooled
/// execution that did not complete is judged by its status against the expectation instead.
std::optional<Differential> fresh_vs_pool(const std::vector<const ExecutionResult*>& executions);

}  // namespace cprr

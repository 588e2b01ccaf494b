#pragma once
// Verdicts: the design brief's vocabulary as an enum, and the one pure function that decides a
// replay's verdict from what was recorded and what the replays did. cpreplay does the I/O and the
// logging around it; this file only judges.
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "analysis/divergence.h"
#include "analysis/layout_check.h"
#include "analysis/race_check.h"
#include "data/execution.h"

namespace cprr {

enum class Verdict : uint8_t {
  reproduced,
  state_leak,
  stream_race,
  allocator_order,
  uninitialized_read,
  collective_mismatch,
  nondeterministic,
  hang,
  crash,
};

/// The JSON and table word: "reproduced", "state_leak", ...
std::string_view verdict_name(Verdict v);
std::optional<Verdict> parse_verdict(std::string_view s);

/// What a replay knows: the case's first recorded execution of each mode and the replays it ran
/// (null where absent: a mode not recorded or not replayed).
struct ReplayFacts {
  const ExecutionResult* recorded_fresh = nullptr;
  const ExecutionResult* recorded_pool = nullptr;
  const ExecutionResult* replayed_fresh = nullptr;
  const ExecutionResult* replayed_pool = nullptr;
  /// The happens-before check's finding over the recorded and replayed op logs, if any.
  const RaceFinding* race = nullptr;
  /// The cross-rank checks' findings over the same logs (analysis/layout_check.h), if any.
  const Finding<LayoutMismatch>* allocation = nullptr;
  const Finding<CollectiveMismatch>* collective = nullptr;
  const Finding<UninitRead>* uninitialized = nullptr;
};

struct VerdictDecision {
  Verdict verdict = Verdict::reproduced;
  std::optional<Divergence> where;  ///< the divergence the verdict rests on, if any
  std::string why;                  ///< one line for the replay log
  /// state_leak found by the fresh and pooled replays: the polluters are worth delta-debugging.
  bool localize_polluters = false;
};

/// The replay verdict, in order: ranks that called a collective differently are
/// collective_mismatch, also when a replay then crashed or hung (the mismatch is the cause); a
/// crash or hang in a replay is that verdict; a symmetric layout that differs across ranks
/// allocator_order, a read of never-written bytes uninitialized_read (before state_leak: a dirty
/// pool is its carrier, not its cause), a race in the op logs stream_race (whatever the outputs
/// did: they are the symptoms; not a race candidate, which only its replays make one:
/// confirmed_verdict); a fresh replay that differs from the fresh record is
/// nondeterministic; pooled differing from fresh is a state_leak; a replay that differs from its
/// own mode's record is nondeterministic (or, when only a pooled record exists and only fresh was
/// replayed, a state_leak); else reproduced. Two executions across transports (across_transports)
/// may differ by reduction order alone: their difference is never a verdict, only named in `why`.
/// Expects replays that ran (no `error` status: that is an infrastructure failure, not a fact).
VerdictDecision decide_verdict(const ReplayFacts& facts);

/// What the confirming replays showed of a decided verdict's findings.
struct Confirmations {
  bool poison_ran = false;        ///< the poisoned replays both completed
  bool poison_confirmed = false;  ///< their outputs followed the poison
  bool race_confirmed = false;    ///< the race's replays confirmed it
  /// The race is a candidate (Race::candidate), which decide_verdict left out.
  bool race_candidate = false;
};

/// The most specific confirmed finding: an uninitialized read the poisoned replays did not show
/// gives way to a race the replays confirmed (the read may be of bytes that reach nothing, the
/// race is what changed the outputs); a race candidate the replays confirmed is stream_race in
/// place of a verdict from the outputs alone (reproduced, nondeterministic, state_leak), as a
/// race of known directions is; otherwise `decided` stands (an unconfirmed candidate is no
/// finding). Returns the verdict and, when it changed, why (else empty).
std::pair<Verdict, std::string> confirmed_verdict(Verdict decided, const Confirmations& seen);

}  // namespace cprr

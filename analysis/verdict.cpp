#include "analysis/verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "analysis/compare.h"
#include "data/text_forms.h"

namespace cprr {
namespace {

constexpr std::array<std::pair<Verdict, std::string_view>, 9> kVerdicts{{
    {Verdict::reproduced, "reproduced"},
    {Verdict::state_leak, "state_leak"},
    {Verdict::stream_race, "stream_race"},
    {Verdict::allocator_order, "allocator_order"},
    {Verdict::uninitialized_read, "uninitialized_read"},
    {Verdict::collective_mismatch, "collective_mismatch"},
    {Verdict::nondeterministic, "nondeterministic"},
    {Verdict::hang, "hang"},
    {Verdict::crash, "crash"},
}};

bool every_rank_reported(const ExecutionResult& r) {
  return !r.ranks.empty() && std::all_of(r.ranks.begin(), r.ranks.end(),
                                         [](const RankReport& k) { return k.done.has_value(); });
}

VerdictDecision decided(Verdict v, std::optional<Divergence> where, std::string why) {
  return VerdictDecision{v, std::move(where), std::move(why), false};
}

}  // namespace

std::string_view verdict_name(Verdict v) {
  for (const auto& [value, name] : kVerdicts) {
    if (value == v) return name;
  }
  return "?";
}

std::optional<Verdict> parse_verdict(std::string_view s) {
  for (const auto& [value, name] : kVerdicts) {
    if (name == s) return value;
  }
  return std::nullopt;
}

namespace {

/// "the fresh replay", "the pooled record", ...
std::string role(const ExecutionResult& e, bool replayed) {
  return fmt::format("the {} {}", e.mode == Mode::fresh ? "fresh" : "pooled",
                     replayed ? "replay" : "record");
}

/// decide_from_outputs's comparisons. One across transports is never a verdict: their outputs may
/// differ by reduction order alone, so a difference there is only named (`uncounted`).
struct OutputComparisons {
  std::string uncounted;

  /// How `actual` differs from `expected` within one transport (compare); nullopt otherwise.
  std::optional<Divergence> differs(const ExecutionResult& expected, bool expected_replayed,
                                    const ExecutionResult& actual, bool actual_replayed) {
    std::optional<Divergence> d = compare(expected, actual);
    if (!d || d->transports.empty()) return d;
    d->transports.clear();  // said below in words
    uncounted += fmt::format(
        "{}{}'s collectives went through {}, {}'s through {}: outputs may differ by reduction "
        "order, so their difference is not judged ({})",
        uncounted.empty() ? "" : "; ", role(actual, actual_replayed), actual.collectives,
        role(expected, expected_replayed), expected.collectives, d->describe());
    return std::nullopt;
  }
};

VerdictDecision decide_from_outputs(const ReplayFacts& f) {
  OutputComparisons c;
  if (f.replayed_fresh != nullptr && f.recorded_fresh != nullptr) {
    if (auto d = c.differs(*f.recorded_fresh, false, *f.replayed_fresh, true)) {
      return decided(Verdict::nondeterministic, d,
                     "a fresh replay differs from the fresh record: " + d->describe());
    }
  }
  if (f.replayed_fresh != nullptr && f.replayed_pool != nullptr) {
    if (auto d = c.differs(*f.replayed_fresh, true, *f.replayed_pool, true)) {
      VerdictDecision v =
          decided(Verdict::state_leak, d, "pooled differs from fresh: " + d->describe());
      v.localize_polluters = true;
      return v;
    }
  }
  // What is left: the pooled replay against the pooled record (same predecessors, so a difference
  // is nondeterminism), or, when only a pooled record exists, the fresh replay against it.
  const ExecutionResult* replayed = f.replayed_pool != nullptr ? f.replayed_pool : f.replayed_fresh;
  const ExecutionResult* reference =
      f.replayed_pool != nullptr ? f.recorded_pool
                                 : (f.recorded_fresh == nullptr ? f.recorded_pool : nullptr);
  if (replayed != nullptr && reference != nullptr) {
    if (auto d = c.differs(*reference, false, *replayed, true)) {
      const Verdict v =
          f.replayed_pool != nullptr ? Verdict::nondeterministic : Verdict::state_leak;
      return decided(
          v, d,
          fmt::format("{} replay differs from the {} record: {}", mode_name(replayed->mode),
                      mode_name(reference->mode), d->describe()));
    }
  }
  const std::string uncounted = c.uncounted.empty() ? "" : "; " + c.uncounted;
  if (replayed != nullptr && !every_rank_reported(*replayed)) {
    return decided(
        Verdict::reproduced, std::nullopt,
        fmt::format("the replay ended as recorded ({}); not every rank returned a result "
                    "to compare{}",
                    status_name(replayed->status), uncounted));
  }
  if (!c.uncounted.empty()) {
    return decided(Verdict::reproduced, std::nullopt,
                   "nothing differs within one transport" + uncounted);
  }
  return decided(Verdict::reproduced, std::nullopt,
                 "every rank's probes and outputs match the record");
}

}  // namespace

VerdictDecision decide_verdict(const ReplayFacts& f) {
  // Ranks that called a collective differently explain a crash or hang that followed.
  if (f.collective != nullptr) {
    std::string why =
        "the ranks called a collective differently: " + f.collective->mismatch.describe();
    for (const ExecutionResult* r : {f.replayed_fresh, f.replayed_pool}) {
      if (r != nullptr && !completed(*r)) {
        // Its summary carries the same mismatch (Controller::classify): the status is enough.
        why +=
            fmt::format("; the {} replay ended as {}", mode_name(r->mode), status_name(r->status));
        return decided(Verdict::collective_mismatch, std::nullopt, std::move(why));
      }
    }
  }
  for (const ExecutionResult* r : {f.replayed_fresh, f.replayed_pool}) {
    if (r != nullptr && (r->status == ExecStatus::crash || r->status == ExecStatus::hang)) {
      const Verdict v = r->status == ExecStatus::crash ? Verdict::crash : Verdict::hang;
      return decided(
          v, std::nullopt,
          fmt::format("{} in {} replay: {}", verdict_name(v), mode_name(r->mode), r->summary));
    }
  }
  VerdictDecision d = decide_from_outputs(f);
  const auto found = [&](Verdict v, const std::string& what) {
    const bool shown = d.verdict != Verdict::reproduced;
    return decided(v, std::move(d.where),
                   fmt::format("{}; {}", what,
                               shown ? "the outputs show it: " + d.why
                                     : "the outputs did not show it in these runs"));
  };
  if (f.collective != nullptr) {
    return found(Verdict::collective_mismatch,
                 "the ranks called a collective differently: " + f.collective->mismatch.describe());
  }
  if (f.allocation != nullptr) {
    return found(Verdict::allocator_order,
                 "the symmetric layout differs across ranks: " + f.allocation->mismatch.describe());
  }
  if (f.uninitialized != nullptr) {
    return found(Verdict::uninitialized_read, f.uninitialized->mismatch.describe());
  }
  if (f.race == nullptr || f.race->race.candidate) return d;  // a candidate: confirmed_verdict
  return found(Verdict::stream_race, "stream race in the op log: " + describe_race(*f.race));
}

std::pair<Verdict, std::string> confirmed_verdict(Verdict decided, const Confirmations& seen) {
  if (decided == Verdict::uninitialized_read && seen.poison_ran && !seen.poison_confirmed &&
      seen.race_confirmed) {
    return {Verdict::stream_race,
            "verdict stream_race: the replays confirmed the race, while the poisoned replays "
            "did not show the uninitialized read (still reported)"};
  }
  // decide_verdict skipped a candidate: where a race of known directions would have been the
  // verdict (before what the outputs alone say), the confirmed candidate is.
  const bool from_outputs = decided == Verdict::reproduced ||
                            decided == Verdict::nondeterministic || decided == Verdict::state_leak;
  if (seen.race_candidate && seen.race_confirmed && from_outputs) {
    return {Verdict::stream_race,
            fmt::format("verdict stream_race: the replays confirmed the race candidate (an access "
                        "of unknown direction), in place of {}",
                        verdict_name(decided))};
  }
  return {decided, ""};
}

}  // namespace cprr

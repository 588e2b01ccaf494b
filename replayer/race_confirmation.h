#pragma once
// Confirming a stream race the happens-before check named (analysis/race_check.h) by running the
// case again, perturbed (data/perturbation.h):
// - serialization: every stream of the case folded into one, in issue order; its outputs are the
//   reference, and an earlier run whose outputs differ from it confirms the race;
// - the fix applied, for ops on one rank: one replay holds the second op until the first
//   completed (the host synchronizes right after the first: the verified fix as an edge).
//   Delays only make the recorded order likelier, and serializing misses a stream the case
//   never named (a Triton kernel's own); this forces the other order. Outputs that differ from
//   unperturbed runs which agree with each other confirm the race and say that the recorded
//   runs took the second op before the first had completed (a race whose recorded order
//   is always the lost one). Runs that disagree already are nondeterminism: skipped. When
//   it confirms, the delays and the bisection are not needed;
// - amplification: seeded random delays before stream ops, and a long one before the race's
//   first op, so an op not ordered after it overtakes it; outputs that differ from the
//   serialized ones confirm the race;
// - sync bisection: with the amplifying delays, the host synchronizes every stream after a
//   prefix of the racing rank's ops; bisecting the prefix finds the one boundary whose sync makes
//   the outputs right, which must lie between the race's two ops.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/race_check.h"
#include "data/execution.h"
#include "data/perturbation.h"

namespace cprr {

/// Runs the target once, fresh, with a perturbation (each call is one replay). `then` is how many
/// more replays the confirmation is certain to make after this one, whatever this one shows (the
/// ones whose worlds may start ahead: cpreplay --standby, Controller::foresee); never more.
using PerturbedRun = std::function<ExecutionResult(const Perturbation&, int then)>;

struct ConfirmOptions {
  int seeds = 8;  ///< amplification seeds at most (it stops at the first that confirms)
  uint32_t max_delay_us = 2000;      ///< random delays before stream ops
  uint32_t target_delay_us = 20000;  ///< the delay before the race's first op
  int right_tries = 2;  ///< runs a sync bisection step must read right in to count as right
};

struct RaceConfirmation {
  /// Which checks confirmed the race: "amplification", "serialization", "sync_bisection",
  /// "fix_applied".
  std::vector<std::string> confirmed_by;
  int replays = 0;
  int seeds_run = 0;
  std::optional<uint64_t> amplifying_seed;  ///< the seed whose outputs differed
  /// The boundary the bisection found: the host must synchronize after this op of this rank.
  std::optional<OpSite> sync_edge;
  bool sync_agrees = false;  ///< sync_edge lies in [first op, second op) of the race's rank
  /// Which order the recorded runs took, when the fix applied showed it; empty otherwise.
  std::string recorded_order;
  std::vector<std::string> log;  ///< one line per step, for humans

  /// Whether these replays showed `race`. A race of known directions is shown by any check
  /// (it is one whatever changed the outputs). A candidate (Race::candidate) on one rank needs
  /// the sync bisection to put the outputs' cause between its two ops, or the fix applied (a
  /// sync right after its first op, nothing else changed): outputs a perturbation changes may
  /// come from another race of the case, and a candidate may be two reads. A candidate across
  /// ranks, which is not bisected, rests on the checks alone.
  bool shows(const Race& race) const;
};

/// Confirms `race`. `observed` are executions of the case already run unperturbed (recorded and
/// replayed, fresh); `ops_on_rank` is how many ops the race's second rank logged in the execution
/// the race was found in (the bisection's range).
RaceConfirmation confirm_race(const RaceFinding& race,
                              const std::vector<const ExecutionResult*>& observed,
                              uint64_t ops_on_rank, const PerturbedRun& run,
                              const ConfirmOptions& options = {});

}  // namespace cprr

#pragma once
// Where a world's start time goes: the controller's own steps (spawning) and the ranks' reported
// steps (recorder/rank: set-up, CUDA context, arenas, communicator), laid along the world's start
// so they add up to it. Ranks start side by side, so the steps shown are those of the rank that
// held the world up: the last to say hello, then the last to join the communicator.
#include <chrono>
#include <string>
#include <vector>

#include "data/execution.h"
#include "runtime/startup_phases.h"

namespace cprr {

/// What the controller saw of one rank's start, and what the rank said of it.
struct RankStart {
  /// Its spawn began (or its agent was asked for it): its own steps all come after.
  std::chrono::steady_clock::time_point spawned_at{};
  std::chrono::steady_clock::time_point hello_at{};      ///< its Hello arrived
  std::chrono::steady_clock::time_point connected_at{};  ///< its Connected arrived
  std::vector<StartupPhase> before_hello;                ///< Hello::phases
  std::vector<StartupPhase> connecting;                  ///< Connected::phases
};

/// The steps of a world's start, in order, adding up to the time from `begin` (the world was
/// asked for) to `ready` (every rank joined the communicator): "spawn ranks" (until the spawn of
/// the last rank to say hello began), "exec and load" (what that rank's hello leaves unexplained:
/// its spawn and what came before its main()), its own steps, the communicator steps of the last
/// rank to join, and "messages and waiting" for the rest (the hellos' trip, Bootstrap's, slower
/// ranks). None is negative.
std::vector<StartupPhase> world_startup_phases(std::chrono::steady_clock::time_point begin,
                                               std::chrono::steady_clock::time_point ready,
                                               const std::vector<RankStart>& ranks);

/// What the ranks said their symmetric pool is, as one line: the common answer, or each rank's.
std::string summarize_pools(const std::vector<std::string>& pools);

/// What an execution's ranks said their symmetric pool is after its case (it may be made in a
/// case: runtime/cuda_backend.h), summarized; `at_start` (the world's, from connecting) when a
/// rank did not report.
std::string pool_after_case(const std::vector<RankReport>& ranks, const std::string& at_start);

/// The start-up an execution's case paid at first use: the steps of the rank that paid most
/// (ranks wait for each other at the first collective, so the slowest held the case up).
std::vector<StartupPhase> first_use_phases(const std::vector<RankReport>& ranks);

}  // namespace cprr

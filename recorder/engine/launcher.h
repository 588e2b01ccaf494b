#pragma once
// How a world's ranks are started: `local` spawns them as children of the controller joined by
// socketpairs (the default); `mpirun` (Open MPI) and `srun` (Slurm) start them through a launcher
// the user's cluster already has, and each rank connects back over TCP (rank_listener.h) with
// the run's token. Everything here is pure: the launcher's argv and its one-line description.
#include <string>
#include <vector>

#include "data/launch_options.h"

namespace cprr {

/// The launcher's argv for a world of `world_size` ranks, each running `rank_argv` (the worker
/// with --connect). No shell is involved: every element is one argument. The token is never in
/// it: mpirun is told to export CPRR_TOKEN from its environment (-x), srun exports the whole
/// environment by default.
std::vector<std::string> launcher_argv(const LaunchOptions& o, int world_size,
                                       const std::vector<std::string>& rank_argv);

/// One line for messages and the run's record: "mpirun --host a,b" style, without the rank part.
std::string describe(const LaunchOptions& o);

}  // namespace cprr

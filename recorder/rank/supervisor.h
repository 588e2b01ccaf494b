#pragma once
// The rank side of a launcher (mpirun, srun): `cpworker --connect HOST:PORT` is what the launcher
// starts. It reads its rank from the launcher's environment, opens four TCP connections back to
// the controller (control, stdout, stderr, its own; each authenticated with the run's token),
// spawns the real rank process with the first three as its control channel, stdout and stderr,
// and stays beside it: it forwards the controller's signals to the rank's process group and
// reports how the rank ended (RankExited), which the controller cannot learn with waitpid across
// hosts. It always exits 0 after reporting, so a launcher that ends the whole job when one
// process fails (mpirun) leaves the other ranks to the controller, as a local world does.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "recorder/launch/tcp.h"

namespace cprr {

struct SupervisorArgs {
  Endpoint controller;
  uint64_t world = 0;
  std::optional<int> rank;  ///< --rank; else the launcher's environment (launcher_rank)
  int world_size = 0;
  std::string rendezvous;
  std::string backend = "cpu";
  /// What the rank runs, before its own arguments (--rank, --control-fd, ...): the worker with
  /// its arguments (cprr-pyworker --cases FILE); empty: this executable.
  std::vector<std::string> rank_command;
};

/// The rank a launcher gave this process: OMPI_COMM_WORLD_RANK (Open MPI), SLURM_PROCID (srun),
/// PMIX_RANK or PMI_RANK (other PMI launchers), in that order; nullopt when none is set.
std::optional<int> launcher_rank();
/// Its index among the processes of its node: OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or
/// MPI_LOCALRANKID; nullopt when none is set.
std::optional<int> launcher_local_rank();
/// The ranks on this node, from the launcher's environment (sizes a shared GPU's arenas).
std::optional<int> launcher_local_size();

/// Connects, spawns the rank and supervises it; returns the supervisor's exit code (0 once the
/// rank's end was reported, 2 when it could not connect or was refused, 3 when the controller
/// went away first).
int supervise(const SupervisorArgs& args);

}  // namespace cprr

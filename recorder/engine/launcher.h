#pragma once
// How a run's ranks are started: `local` spawns them as children of the controller joined by
// socketpairs (the default); `mpirun` (Open MPI) and `srun` (Slurm) start one node agent per node
// through a launcher the user's cluster already has (node_agents.h), once per run, and each agent
// connects back over TCP (rank_listener.h) with the run's token. Everything here is pure: the
// launcher's argv, its one-line description, the node count and the addresses.
#include <optional>
#include <string>
#include <vector>

#include "data/launch_options.h"
#include "recorder/launch/tcp.h"

namespace cprr {

/// How many node agents the run starts: one per --hosts entry; else, for srun, the node count of
/// the allocation it runs in (`slurm_nodes`: SLURM_JOB_NUM_NODES) when there is one; else one
/// (this host for mpirun, the node srun picks). Throws UsageError for mpirun given its hosts only
/// through --launcher-arg (--host, --hostfile, ...): cprr cannot count them, --hosts names them.
int agent_nodes(const LaunchOptions& o, std::optional<int> slurm_nodes);

/// The launcher's argv that places one agent on each of `nodes` nodes, each running `agent_argv`
/// (the agent binary with --agent). No shell is involved: every element is one argument. The
/// token is never in it: mpirun is told to export CPRR_TOKEN from its environment (-x), srun
/// exports the whole environment by default.
std::vector<std::string> agents_launcher_argv(const LaunchOptions& o, int nodes,
                                              const std::vector<std::string>& agent_argv);

/// One line for messages and the run's record: "mpirun --host a,b" style, without the rank part.
std::string describe(const LaunchOptions& o);

/// The address launched agents connect back to: --advertise, else the listen address when it is
/// one address, else this host's name.
std::string advertised_host(const LaunchOptions& o, const Endpoint& bound);
/// Where the controller listens: --listen, else 127.0.0.1 when every rank runs on this host,
/// else every interface; any free port unless one is given.
Endpoint listen_endpoint(const LaunchOptions& o);

}  // namespace cprr

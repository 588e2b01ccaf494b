#pragma once
// The node agent: with --launcher mpirun or srun, the launcher starts one `cpworker --agent
// HOST:PORT` per node for the whole run (engine/node_agents.h), instead of one process per rank
// per world. The agent connects back over TCP with the run's token (Channel::agent) and then
// starts every rank of every world the controller places on its node (StartRank): for each it
// opens the rank's four channels as a supervisor would, spawns the rank (a C++ worker) or forks
// it from a template process that imported torch and the case files once (a Python worker, the
// local launcher's way: launch/rank_spawner.h), and supervises it: it forwards the controller's
// signals to the rank's process group and reports how the rank ended (RankExited). A rank that
// crashes is its child; the agent reports it and starts the next world's ranks as usual.
//
// Nothing outlives the run: when the controller's connection ends (the run ended, however it
// ended) or the agent is told to stop (SIGTERM, SIGINT, SIGHUP from the launcher), it ends every
// rank's process group, its templates and what they left, and exits.
#include <optional>
#include <string>
#include <vector>

#include "recorder/launch/tcp.h"

namespace cprr {

struct AgentArgs {
  Endpoint controller;
  int nodes = 0;            ///< --nodes: the run's node count (one agent each)
  std::optional<int> node;  ///< --node; else the launcher's rank of this process
  /// After --: the worker and its arguments each rank runs (cprr-pyworker --cases FILE...);
  /// empty: this executable (a C++ worker binary is its own agent).
  std::vector<std::string> rank_command;
};

/// Connects, then starts and supervises ranks until the controller closes the connection or a
/// stop signal arrives. Returns the exit code: 0 after a normal end, 2 when it could not connect
/// or was refused, 3 after a stop signal.
int run_agent(const AgentArgs& args);

}  // namespace cprr

#pragma once
// The controller's side of the node agents (recorder/rank/agent.h): with --launcher mpirun or
// srun, one launcher job for the whole run places one agent on each node, and every world's ranks
// are started by the agents of the nodes they land on: no launcher job per world, and a Python
// worker's ranks are forked from a template each agent keeps, as local ranks are. A world's ranks
// then connect back to the listener as launched ranks always did (accept_world), each supervised
// by its node's agent (RemoteRank).
//
// An agent that dies, or whose node drops (its connection breaks or times out), is named with its
// node and host; the worlds it held end as infrastructure errors (World::infrastructure_fault),
// and later worlds are placed on the nodes left. When none can hold a world, placing it throws
// NoNodeLeft and the run stops. Destruction closes every agent's connection, which ends the agents
// and their ranks wherever they run, then ends the launcher job: nothing is left on any node.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/launch_options.h"
#include "recorder/engine/launcher.h"
#include "recorder/engine/rank_listener.h"
#include "recorder/launch/log_drain.h"
#include "recorder/launch/process.h"
#include "recorder/protocol/protocol.h"
#include "runtime/backend_kind.h"
#include "runtime/error.h"
#include "runtime/fd.h"

namespace cprr {

/// No node left can hold a world: every agent died, or those left are too few for its ranks.
class NoNodeLeft : public Error {
 public:
  using Error::Error;
};

/// Where each rank of a world of `world_size` goes: the index into `live` (the live nodes, in
/// order) of its node, filled node by node: `per_node` ranks each when --gpus-per-node is set,
/// else as evenly as the nodes allow. Throws NoNodeLeft when the nodes cannot hold it.
std::vector<int> place_ranks(int world_size, int live_nodes, int gpus_per_node);

class NodeAgents {
 public:
  struct Config {
    LaunchOptions launch;
    /// The agent binary and what follows `--` on its command line (the worker and its
    /// arguments; empty for a C++ worker, which is its own agent).
    std::string program;
    std::vector<std::string> rank_command;
    /// The worlds' environment less what differs per rank (world_env): every agent's template
    /// starts with it.
    std::vector<std::pair<std::string, std::string>> template_env;
    std::chrono::milliseconds startup_timeout{60000};
    int stop_fd = -1;
  };
  /// Starts the launcher job and waits until every agent connected to `listener`; throws naming
  /// the missing nodes with the launcher's stderr (Interrupted when stop_fd fired).
  NodeAgents(const Config& config, RankListener& listener);
  ~NodeAgents();
  NodeAgents(const NodeAgents&) = delete;
  NodeAgents& operator=(const NodeAgents&) = delete;

  /// Asks the agents to start the ranks of world `world` (place_ranks over the live nodes) and
  /// returns each rank's node. Throws NoNodeLeft when the nodes left cannot hold it.
  std::vector<int> start_world(
      uint64_t world, int world_size, const std::string& rendezvous, BackendKind backend,
      bool fork_from_template,
      const std::vector<std::pair<std::string, std::string>>& template_env);
  /// Held by a world from start_world until its ranks connected: the listener takes one
  /// world's connections at a time, and standby worlds start on several threads.
  std::mutex& starting() { return starting_; }
  /// Throws when an agent refused to start a rank of `world` (its reason), or when an agent of
  /// `nodes` is gone: what accept_world checks while the ranks connect.
  void check_start(uint64_t world, const std::vector<int>& nodes);
  /// Why the agent of `node` is gone ("" while it lives): its connection ended or broke.
  std::string gone(int node);
  /// "node 1 (HOST, agent pid N)", for messages.
  std::string name(int node) const;
  /// The launcher job's output so far (its agents' stderr included), for failure messages.
  std::string launcher_output();
  /// One line for messages and the run's record ("mpirun hosts=a,b").
  const std::string& launcher() const { return launcher_; }

 private:
  struct Agent {
    UniqueFd fd;
    FrameReader reader;
    std::string host;
    int32_t pid = 0;
    std::string gone;  ///< why it is gone; "" while it lives
    std::vector<RankNotStarted> refusals;
  };
  /// Reads what agent `node` sent (RankNotStarted) and notices its end.
  void pump(int node);
  void end_job();

  std::mutex starting_;
  std::mutex mu_;  // worlds start on several threads (standby): one reads an agent at a time
  std::string launcher_;
  int gpus_per_node_ = 0;
  std::optional<ChildProcess> job_;
  LogDrain job_output_;
  std::vector<Agent> agents_;
};

}  // namespace cprr

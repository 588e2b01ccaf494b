#pragma once
// A world: W rank processes of one worker binary, in their own process group, each with a private
// control socket and drained stdout/stderr pipes. Fresh mode makes one per case; pool mode keeps
// one per world size and replaces it after any fault.
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "data/flight_record.h"
#include "recorder/engine/node_agents.h"
#include "recorder/engine/rank_listener.h"
#include "recorder/engine/rank_process.h"
#include "recorder/engine/world_handle.h"
#include "recorder/engine/world_startup.h"
#include "recorder/launch/log_drain.h"
#include "recorder/launch/process.h"
#include "recorder/launch/rank_spawner.h"
#include "recorder/protocol/protocol.h"
#include "runtime/error.h"
#include "runtime/fd.h"

namespace cprr {

/// Removes the per-world directories ("cprr-world-<pid>-*") in `dir` whose owner process is gone
/// (litter of a killed recorder); directories of live processes, and names without an owner pid,
/// are left alone. Returns how many it removed. ProcessWorlds calls it before its first world.
int remove_stale_world_dirs(const std::filesystem::path& dir);

/// The real world: rank processes of the worker binary (the WorldHandle ProcessWorlds makes).
class World : public WorldHandle {
 public:
  /// Starts the ranks (local ones through `spawner`; with a launcher other than local, through
  /// the run's node `agents`, the ranks connecting back to `listener`) and waits until every
  /// rank said hello and joined the communicator (await_ready). Throws cprr::Error naming the
  /// rank, how it ended and its stderr tail (or the launcher's, or the template process's) when
  /// the world cannot start; NoNodeLeft when no node left can hold it.
  World(const WorldConfig& config, uint64_t id, RankSpawner& spawner,
        RankListener* listener = nullptr, NodeAgents* agents = nullptr);
  /// Asks healthy ranks to shut down, then kills the group and reaps every rank, and every
  /// orphan of theirs this process inherited as a subreaper (reap_orphans).
  ~World() override;
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  uint64_t id() const override { return id_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  /// False once a rank died, hung or broke the protocol: the world must be replaced.
  bool reusable() const override { return reusable_; }
  /// Checks an idle world before reuse: a rank that exited, closed its control channel or sent
  /// something unasked since the last case. Returns what happened (the world must be replaced),
  /// so a death between cases is never blamed on the next case.
  std::optional<std::string> idle_fault() override;
  /// Whether the stop descriptor of WorldConfig fired.
  bool stop_requested() const override { return cprr::stop_requested(stop_fd_); }
  /// Time it took to spawn and connect every rank.
  double startup_ms() const override { return startup_ms_; }
  /// Where that time went (world_startup_phases).
  std::vector<StartupPhase> startup_phases() const override { return startup_phases_; }
  const std::string& symmetric_pool() const override { return symmetric_pool_; }
  CollectiveTransport transport() const override { return transport_; }
  const std::string& rank_gpus() const override { return rank_gpus_; }
  /// Names the node agent of this world that is gone (its host), if one is.
  std::string infrastructure_fault() override;

  /// Sends the case to every rank and marks the log positions for its tails.
  void start(const RunCase& msg) override;
  /// Waits for every rank's CaseDone for `execution` until `deadline`. A rank that dies ends
  /// its wait; once one died or reported a failure, the others get at most `after_death` more. A
  /// rank whose channel reaches EOF while it keeps running gets a protocol_error. Returns early,
  /// with the ranks still running, when the stop descriptor fires (stop_requested()).
  std::vector<RankReport> collect(uint64_t execution, Clock::time_point deadline,
                                  std::chrono::milliseconds after_death) override;
  /// Also returns early when every rank is stuck in the same collective and their calls of it
  /// conflict (blocked_mismatch over the flight records, read every kLiveCheckInterval): the
  /// mismatch is named at once instead of after the deadline; and when a rank failed or returned
  /// and another waits in a collective the departed one never entered. stopped_early() says so, and
  /// why ranks were still running at the `after_death` past a failure.
  std::string stopped_early() const override { return stopped_early_; }
  /// Asks ranks without a result for their watchdog status and waits for all of them together, at
  /// most `grace`: a rank that cannot answer (stopped, stuck with its watchdog) costs the others
  /// nothing, and every answer already sent is read.
  void query_status(uint64_t execution, std::vector<RankReport>& reports,
                    std::chrono::milliseconds grace) override;
  /// Reads the flight-<rank> files of the world directory (data/flight_record.h).
  void read_flight_records(uint64_t execution, std::vector<RankReport>& reports) override;
  std::string end_leftovers(const std::string& after) override;
  /// TERM, then KILL after `grace`, to the whole group; reaps all ranks; marks not reusable.
  void kill(std::chrono::milliseconds grace) override;
  /// Fills each report's stdout/stderr tails with what the ranks wrote since start().
  void fill_tails(std::vector<RankReport>& reports) override;

 private:
  struct Rank {
    std::unique_ptr<RankProcess> process;
    UniqueFd control;
    FrameReader reader;
    bool eof = false;
    uint64_t out_mark = 0;
    uint64_t err_mark = 0;
    Clock::time_point spawned_at{};
    /// Its descendants when the world was ready: not the cases' doing (end_leftovers).
    std::vector<pid_t> started_with;
  };
  void spawn_rank(int rank, const WorldConfig& config, RankSpawner& spawner);
  /// The live collective check of collect(): true (and stopped_early_ set) when every rank is
  /// blocked in one collective they called differently, the same at two checks in a row.
  bool blocked_in_mismatch(uint64_t execution, const std::vector<RankReport>& reports);
  /// The other live check: true (and stopped_early_ set) when a rank reported a failure or
  /// returned from the case and a rank still running entered a collective (its flight record)
  /// that the departed one never entered, so it can never complete.
  bool blocked_on_departure(uint64_t execution, const std::vector<RankReport>& reports);
  /// The flight records of the ranks that returned (index = rank; nullopt for the others): the
  /// calls that raised, which their collective logs leave out, are there.
  std::vector<std::optional<FlightLog>> returned_flights(
      uint64_t execution, const std::vector<RankReport>& reports) const;
  /// collect() ended at `after_death` past a rank's failure with ranks still running: says so
  /// in stopped_early_.
  void note_released_at_grace(const std::vector<RankReport>& reports);
  /// Asks the node agents for the ranks and takes their connections from `listener`.
  void start_from_agents(const WorldConfig& config, RankListener& listener);
  /// Start-up: every rank's hello, then Bootstrap with rank 0's communicator id and the transport
  /// chosen from the ranks' GPUs (choose_transport), then every
  /// rank's Connected, all within config.startup_timeout; throws naming the rank that failed.
  /// Times the start from `begin` into startup_phases_.
  void await_ready(const WorldConfig& config, Clock::time_point begin);
  /// Hands one frame from each rank, in arrival order, to `on_frame`; throws `timeout_why` (with
  /// the first silent rank's stderr) at the deadline.
  void await_each(Clock::time_point deadline, const std::string& timeout_why,
                  const std::function<void(int, const std::string&)>& on_frame);
  /// Reads what rank r's control socket holds into reports[r]; false on EOF.
  bool pump(int r, uint64_t execution, RankReport& report);
  /// Rank r's channel reached EOF mid-case: reaps it if it ended (report.exit), else records the
  /// broken channel as its protocol_error.
  void on_eof(int r, RankReport& report);
  std::string startup_failure(int rank, const std::string& why);

  uint64_t id_;
  std::string rendezvous_;
  int stop_fd_ = -1;
  pid_t group_ = 0;  ///< local: rank 0's process group, every rank's
  std::vector<Rank> ranks_;
  NodeAgents* agents_ = nullptr;  ///< the run's node agents, when a launcher started them
  std::vector<int> nodes_;        ///< each rank's node (index into agents_)
  std::string stopped_early_;     ///< collect()'s early return, when it made one
  /// The live check's last sighting of a blocking mismatch: each rank's flight-record length
  /// (empty: none). It stops the wait only when the next check sees the same, nothing entered.
  std::vector<std::size_t> live_seen_;
  Clock::time_point live_first_{};  ///< when live_seen_ was first seen
  /// last_created_pid() when end_leftovers last looked (read before it looked).
  std::optional<pid_t> swept_at_;
  Clock::time_point failed_at_{};  ///< when collect() read the first failed rank's report
  std::vector<Clock::time_point> returned_at_;  ///< when collect() read each rank's return
  std::string symmetric_pool_;  ///< the ranks' Connected::symmetric_pool, summarized at start
  CollectiveTransport transport_ = CollectiveTransport::gloo;  ///< chosen at start
  std::string rank_gpus_;                                      ///< each rank's GPU, from the hellos
  LogDrain logs_;
  bool reusable_ = true;
  double startup_ms_ = 0;
  std::vector<StartupPhase> startup_phases_;
};

/// The listener and the node agents of launched worlds (--launcher mpirun|srun), shared by every
/// ProcessWorlds of a run (cpreplay's controllers, one per pooled replay), so that each node's
/// agent is started once for all of them. Destroyed after every world it started ranks for.
class LaunchedNodes {
 public:
  LaunchedNodes() = default;
  LaunchedNodes(const LaunchedNodes&) = delete;
  LaunchedNodes& operator=(const LaunchedNodes&) = delete;
  /// The listener and the node agents of `config`'s worlds, the agents started now unless they
  /// run (one set per agent command line: the agent binary and its worker). Thread-safe; throws
  /// what NodeAgents' start throws (the next call tries again).
  std::pair<RankListener*, NodeAgents*> for_world(const WorldConfig& config);

 private:
  std::mutex mu_;
  std::unique_ptr<RankListener> listener_;
  // Declared after the listener: destroyed first, ending the agents while it still listens.
  std::map<std::vector<std::string>, std::unique_ptr<NodeAgents>> agents_;
};

/// The default WorldFactory: every world it makes is a World of real rank processes.
class ProcessWorlds : public WorldFactory {
 public:
  /// The first world it makes first sweeps the temp directory of dead recorders' world
  /// directories (remove_stale_world_dirs): once per controller, not per case. The first world
  /// started through a launcher opens the listener (and the run's token) every later one uses,
  /// and starts the node agents (one launcher job for the run) that start every world's ranks.
  /// A worker with arguments (the Python worker) has its ranks forked from a template process
  /// (TemplateSpawner), one per TemplateCommand, started with the first world that needs it and
  /// ended with this factory; others are posix_spawn'ed (WorldSpec::fork_from_template).
  /// `nodes`: the launched worlds' agents, shared with other factories of the run.
  explicit ProcessWorlds(std::shared_ptr<LaunchedNodes> nodes = std::make_shared<LaunchedNodes>())
      : nodes_(std::move(nodes)) {}
  std::unique_ptr<WorldHandle> make(const WorldConfig& config, uint64_t id) override;

 private:
  /// The spawner of `config`'s ranks (mu_ held).
  RankSpawner& spawner_for(const WorldConfig& config);

  // Standby worlds start on their own threads (Controller::foresee): the first-world set-up is
  // guarded. Launched worlds never start concurrently (the listener takes one at a time).
  std::mutex mu_;
  bool swept_ = false;
  /// Destroyed after every world (the factory outlives its controller's worlds) unless shared.
  std::shared_ptr<LaunchedNodes> nodes_;
  DirectSpawner direct_;
  // Declared last: destroyed first, once every world it forked ranks for is gone (the factory
  // outlives its controller's worlds).
  std::map<TemplateCommand, std::unique_ptr<TemplateSpawner>> templates_;
};

/// What every rank of `config`'s worlds has in its environment on top of the controller's, local
/// or launched, before its own CPRR_RANK and CPRR_WORLD_SIZE (a template process gets this).
std::vector<std::pair<std::string, std::string>> world_env(const WorldConfig& config);

}  // namespace cprr

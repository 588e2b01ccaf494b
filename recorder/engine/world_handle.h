#pragma once
// The seam between the controller and its worlds: what Controller uses of a world, and the factory
// that makes one. World (world.h) spawns real rank processes; tests put a scripted fake behind
// the same interface, so pooling, replacement, deadlines and interruption are tested without one.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/execution.h"
#include "recorder/engine/launcher.h"
#include "recorder/launch/rank_spawner.h"  // Interrupted
#include "recorder/protocol/protocol.h"
#include "runtime/backend_kind.h"
#include "runtime/error.h"
#include "runtime/startup_phases.h"
#include "runtime/transport.h"

namespace cprr {

using Clock = std::chrono::steady_clock;

/// What cprecord and cpreplay let the user choose of how cases run (cli/cli_options.h
/// SharedOptions::run): parsed once into this value, which the options, the controller and each
/// world hold whole, so no field is copied on the way.
struct RunChoices {
  std::optional<double> timeout_override_s;  ///< --timeout: overrides every case's deadline
  /// --standby N: fresh worlds started ahead (ControllerConfig); 0: none.
  int standby = 0;
  /// --collectives: auto (NCCL on cuda when every rank has a GPU of its own, else Gloo staged
  /// through host memory), nccl or gloo (runtime/transport_choice.h). Unset: auto (cpreplay sets
  /// the record's before it replays).
  std::optional<CollectivesRequest> collectives;
  /// With worker_args (the Python worker), local ranks are forked from a template process that
  /// loaded the worker once (launch/rank_spawner.h) instead of each starting it afresh; false
  /// posix_spawns every rank (`CPRR_PYTHON_TEMPLATE=off`). A worker without arguments is always
  /// spawned.
  bool fork_from_template = true;

  CollectivesRequest requested() const {
    return collectives.value_or(CollectivesRequest::automatic);
  }
};

/// What every world of a controller starts its ranks with: ControllerConfig is one and hands it
/// to each WorldConfig whole, so no field is copied by hand on the way.
struct WorldSpec {
  std::string worker;  ///< path of the worker binary
  /// Given to the worker before the rank's own arguments: `cprecord --python`'s `--cases
  /// FILE...` for the Python worker (python/cprr/worker.py).
  std::vector<std::string> worker_args;
  RunChoices run;
  /// How long a world's ranks may take to start (hello, then the communicator).
  std::chrono::milliseconds startup_timeout{60000};
  /// How much of each rank's stdout and stderr a world keeps for its reports.
  std::size_t log_tail_bytes = 16 * 1024;
  /// With worker_args, through a launcher: the node agent's binary (cpworker, run as `--agent`),
  /// which starts the worker with its arguments for each rank it is asked for. A worker without
  /// arguments is its own agent.
  std::string agent_binary;
  BackendKind backend = BackendKind::cpu;
  /// How the ranks are started: local children (default) or through mpirun/srun over TCP.
  LaunchOptions launch;
  /// Set in every rank's environment (replay re-applies a run's recorded variables).
  /// NCCL_NVLS_ENABLE=0 always wins: an entry turning NVLink multicast on is dropped.
  std::vector<std::pair<std::string, std::string>> env;
  /// A descriptor that becomes readable when the caller wants to stop (InterruptWatch::fd(), or
  /// -1 for none). Start-up and collect() poll it along with the ranks; it is never read, so it
  /// stays readable once set.
  int stop_fd = -1;
};

/// What a world is made of: the spec every world of its controller shares, and its size.
struct WorldConfig : WorldSpec {
  int world_size = 2;
};

/// A started world of ranks, as the controller drives it: one case at a time, start() then
/// collect(), then on trouble query_status() and kill(); destroying it shuts the ranks down.
class WorldHandle {
 public:
  virtual ~WorldHandle() = default;

  /// The id the factory gave it (results carry it as world_id).
  virtual uint64_t id() const = 0;
  /// False once a rank died, hung or broke the protocol, or after kill(): it must be replaced.
  virtual bool reusable() const = 0;
  /// Checks an idle world before reuse; returns what went wrong since the last case (and marks
  /// it not reusable), so a death between cases is never blamed on the next case.
  virtual std::optional<std::string> idle_fault() = 0;
  /// Whether the stop descriptor of its WorldConfig fired.
  virtual bool stop_requested() const = 0;
  /// Time it took to spawn and connect every rank.
  virtual double startup_ms() const = 0;
  /// Where that time went, step by step (engine/world_startup.h); empty when not measured.
  virtual std::vector<StartupPhase> startup_phases() const { return {}; }
  /// What the ranks said their symmetric pool is (Backend::symmetric_pool): one line when they
  /// agree, else "rank 0: ...; rank 1: ...".
  virtual const std::string& symmetric_pool() const = 0;
  /// How its collectives travel and each rank's GPU ("0,0": ranks sharing GPU 0; empty on cpu):
  /// ExecutionResult::collectives (the transport's name) and rank_gpus.
  virtual CollectiveTransport transport() const = 0;
  virtual const std::string& rank_gpus() const = 0;
  /// Why this world's infrastructure failed under it (a node agent that died, a node that
  /// dropped), named with its host; "" when nothing did. A case whose world this names has no
  /// verdict of its own: the controller makes it an `error`.
  virtual std::string infrastructure_fault() { return {}; }

  /// Sends the case to every rank and marks the log positions for its tails.
  virtual void start(const RunCase& msg) = 0;
  /// Every rank's report for `execution`: its result, or how it died or broke, or nothing when
  /// it was still running at `deadline` (or when the stop descriptor fired). Once a rank died
  /// or reported a failure the others get at most `after_death` more.
  virtual std::vector<RankReport> collect(uint64_t execution, Clock::time_point deadline,
                                          std::chrono::milliseconds after_death) = 0;
  /// Why the last collect() returned before its deadline with ranks still running, other than
  /// the stop descriptor (its ranks stuck in a collective they called differently, or one a
  /// failed rank never entered, or still running after one failed); empty: it did not.
  virtual std::string stopped_early() const { return {}; }
  /// Ends every process the ranks started since the world was ready that still runs (a case's
  /// fork, a library's helper; orphans of a rank that died included) and says so, one clause per
  /// rank: "rank 1 left 1 process running after <after>: pid 4242 (sleep 100), killed"; empty
  /// when there were none. Local ranks only: a launched rank's supervisor ends what its rank
  /// leaves when the rank ends.
  virtual std::string end_leftovers(const std::string& after) {
    (void)after;
    return {};
  }
  /// Fills the watchdog answers of ranks without a result, waiting at most `grace` for all.
  virtual void query_status(uint64_t execution, std::vector<RankReport>& reports,
                            std::chrono::milliseconds grace) = 0;
  /// Fills `entered` of each rank without a result from its flight record of `execution`: the
  /// collectives it called before it died or got stuck.
  virtual void read_flight_records(uint64_t execution, std::vector<RankReport>& reports) = 0;
  /// Ends every rank (abort, TERM, KILL after `grace`) and reaps them; marks not reusable.
  virtual void kill(std::chrono::milliseconds grace) = 0;
  /// Fills each report's stdout/stderr tails with what the ranks wrote since start().
  virtual void fill_tails(std::vector<RankReport>& reports) = 0;
};

/// Makes the controller's worlds; the default one spawns real rank processes (ProcessWorlds).
class WorldFactory {
 public:
  virtual ~WorldFactory() = default;
  /// A started world of `config.world_size` ranks. Throws cprr::Error naming the rank and why
  /// when it cannot start, Interrupted when the stop descriptor fired meanwhile.
  virtual std::unique_ptr<WorldHandle> make(const WorldConfig& config, uint64_t id) = 0;
};

}  // namespace cprr

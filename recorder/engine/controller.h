#pragma once
// The controller: runs one case instance at a time in a fresh world or in the pooled world of
// its size, enforces the deadline, classifies faults and replaces broken worlds. Every result is
// tied to its execution id, so nothing is ever attributed to the wrong case.
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/execution.h"
#include "data/perturbation.h"
#include "data/text_forms.h"
#include "recorder/engine/plan.h"
#include "recorder/engine/world_handle.h"

namespace cprr {

/// The longest deadline a case may have (seven days). Longer ones, from --timeout or a case's own
/// timeout_s, would overflow the steady clock's time_point and expire at once.
inline constexpr double kMaxTimeoutS = 7 * 24 * 3600;

/// Checks a --timeout value: a finite number of seconds in (0, kMaxTimeoutS]. Returns what is
/// wrong with it ("" when it is fine), for a CLI validator or a UsageError.
std::string timeout_problem(double seconds);

/// How the controller runs cases: what its worlds start with (WorldSpec: the worker, the backend,
/// the transport, the launcher, the environment; the ranks always get NCCL_NVLS_ENABLE=0 on top),
/// deadlines and grace periods. Its stop descriptor is never read, so it stays readable: the
/// running execution ends at once (its ranks killed and reaped, its world and the world's
/// directory gone) and every later run() returns at once; both are `error` results with
/// ExecutionResult::interrupted set.
struct ControllerConfig : WorldSpec {
  /// The deadline per case: a case's own timeout_s unless this override is set.
  double default_timeout_s = 60;
  std::chrono::milliseconds kill_grace{500};     ///< TERM -> KILL
  std::chrono::milliseconds after_death{2000};   ///< what survivors of a crash or failure get
  std::chrono::milliseconds status_grace{1000};  ///< how long watchdogs get to answer
  /// Ranks time every op and allocation (CaseCapture::timeline) for a trace (--trace).
  bool timeline = false;
  // Fresh mode: run.standby fresh worlds start ahead while a case runs, for the executions
  // foresee() names. A standby world stays fresh: it runs nothing before its own case. With a
  // launcher, the node agents start standby worlds one at a time (NodeAgents::starting).
  /// How standby worlds start: on the controller's starter threads (the default), or deferred
  /// until its case takes it (tests that want one thread).
  std::launch standby_policy = std::launch::async;
  /// Fresh worlds that ended healthy are shut down on a thread of their own (WorldRetirer), so
  /// the next case need not wait for their ranks to tear down CUDA and NCCL and exit. Tests that
  /// record a fake world's calls on one thread turn it off.
  bool retire_in_background = true;
  /// cprecord --jobs: the ids this controller gives its worlds and executions are first_id,
  /// first_id + id_step, ...: the N controllers of one run (first ids 1..N, step N) never give
  /// one id twice, so every world id names one process group's cases within the run.
  uint64_t first_id = 1;
  uint64_t id_step = 1;
  /// Where its worlds run, recorded with each execution (ExecutionResult::devices).
  std::string devices;
  /// The MASTER_PORT its worlds' ranks get (set as CPRR_MASTER_PORT in their environment, which
  /// cprr's Python side hands a case as MASTER_PORT) and each execution records; 0: none set.
  /// The caller holds the port's claim (recorder/launch/port_claim.h) while the controller runs.
  int master_port = 0;
  /// The controller's clock for deadlines and wall times; tests pass a fake one. The worlds keep
  /// the steady clock for their own waits.
  std::function<Clock::time_point()> now = Clock::now;
};

/// Threads that start standby worlds. They live as long as their controller: a rank dies with
/// the thread that spawned it (PR_SET_PDEATHSIG follows the spawning thread, not the process), so
/// a world must never be started on a thread that ends before the world does.
class WorldStarters {
 public:
  using Start = std::function<std::unique_ptr<WorldHandle>()>;
  /// Joins the threads once the starts queued so far are done.
  ~WorldStarters();
  /// Runs `start` on one of at most `threads` threads (made as needed).
  std::future<std::unique_ptr<WorldHandle>> submit(Start start, int threads);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<std::unique_ptr<WorldHandle>()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

/// Shuts worlds down on one thread of its own, one at a time. At most one more waits its turn
/// (retire() blocks until then), so worlds still holding their GPU memory never pile up.
class WorldRetirer {
 public:
  /// Waits until every world handed over is shut down.
  ~WorldRetirer();
  /// Destroys `world` on the retiring thread (started on first use).
  void retire(std::unique_ptr<WorldHandle> world);
  /// Returns once every world handed over so far is shut down.
  void drain();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<WorldHandle> waiting_;
  bool busy_ = false;  ///< the thread is destroying one
  bool stop_ = false;
  std::thread thread_;
};

/// Runs case instances one at a time, each in a fresh world or its size's pooled world.
class Controller {
 public:
  /// Runs cases in worlds of real rank processes (ProcessWorlds).
  explicit Controller(ControllerConfig config);
  /// Runs cases in the worlds `worlds` makes: the seam where tests put a scripted fake.
  Controller(ControllerConfig config, std::unique_ptr<WorldFactory> worlds);
  /// Shuts every pooled world down.
  ~Controller();

  /// Runs one execution of `inst` and returns its classified result. Never throws for faults
  /// of the case or the world; those are the result. `perturbation` is a replay's (recording
  /// never perturbs).
  ExecutionResult run(const CaseInstance& inst, Mode mode,
                      Placement placement = Placement::best_fit,
                      const Perturbation& perturbation = {});
  /// The fresh executions from the next run() on, as their world sizes in order: the next run's
  /// own first when `next_is_fresh`. Its world and those of the config.run.standby after it start
  /// now (worlds already standing by for them are kept; ones no longer needed are shut down), so
  /// config.run.standby worlds start while each fresh case runs. A fresh run() takes the first
  /// world standing by for its size: its own.
  void foresee(const std::vector<int>& fresh_world_sizes, bool next_is_fresh);
  /// What it was made with.
  const ControllerConfig& config() const { return config_; }
  /// Why no later case can run (no node left with a live agent can hold its world: the last
  /// run() is that case's error); "" while cases can run. The run stops there.
  const std::string& cannot_go_on() const { return cannot_go_on_; }
  /// Shuts every pooled and standby world down.
  void close_pools();

 private:
  /// After close_pools(): kills what ranks left that no world's sweep (end_leftovers) found,
  /// now this process's children as a subreaper, naming them on stderr.
  void end_strays();
  WorldHandle& world_for(const CaseInstance& inst, Mode mode, std::unique_ptr<WorldHandle>& fresh,
                         ExecutionResult& res);
  std::chrono::milliseconds deadline_for(const CaseInstance& inst) const;
  WorldConfig world_config(int world_size) const;
  /// A standby world of this size, started (or failing to: its error is this case's); nullptr
  /// when none stands by.
  std::unique_ptr<WorldHandle> take_standby(int world_size);
  /// Judges the collected reports (cprr::classify) and does the I/O the judgement calls for.
  void classify(ExecutionResult& res, WorldHandle& world);

  ControllerConfig config_;
  std::unique_ptr<WorldFactory> worlds_;
  WorldStarters starters_;  // declared before the worlds: it outlives every one it started
  WorldRetirer retirer_;    // likewise: the worlds it holds were started by this controller
  std::map<int, std::unique_ptr<WorldHandle>> pools_;
  /// A fresh world starting or started ahead of its case (foresee()).
  struct Standby {
    int world_size = 0;
    std::future<std::unique_ptr<WorldHandle>> world;
  };
  std::deque<Standby> standby_;
  std::map<uint64_t, uint64_t> served_;  // world id -> cases run
  std::string cannot_go_on_;
  uint64_t next_world_ = 1;      // config_.first_id, then every id_step-th
  uint64_t next_execution_ = 1;  // likewise
  /// `next`, which then moves on by config_.id_step.
  uint64_t take_id(uint64_t& next) const;
};

}  // namespace cprr

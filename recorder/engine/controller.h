#pragma once
// The controller: runs one case instance at a time in a fresh world or in the pooled world of
// its size, enforces the deadline, classifies faults and replaces broken worlds. Every result is
// tied to its execution id, so nothing is ever attributed to the wrong case.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "recorder/data/execution.h"
#include "recorder/data/perturbation.h"
#include "recorder/data/text_forms.h"
#include "recorder/engine/plan.h"
#include "recorder/engine/world_handle.h"

namespace cprr {

/// The longest deadline a case may have (seven days). Longer ones, from --timeout or a case's own
/// timeout_s, would overflow the steady clock's time_point and expire at once.
inline constexpr double kMaxTimeoutS = 7 * 24 * 3600;

/// Checks a --timeout value: a finite number of seconds in (0, kMaxTimeoutS]. Returns what is
/// wrong with it ("" when it is fine), for a CLI validator or a UsageError.
std::string timeout_problem(double seconds);

/// How the controller runs cases: the worker, the backend, deadlines, grace periods, environment.
struct ControllerConfig {
  std::string worker;
  std::string backend = "cpu";
  /// The deadline per case: a case's own timeout_s unless this override is set.
  double default_timeout_s = 60;
  std::optional<double> timeout_override_s;
  std::chrono::milliseconds startup_timeout{60000};
  std::chrono::milliseconds kill_grace{500};     ///< TERM -> KILL
  std::chrono::milliseconds after_death{2000};   ///< how long survivors of a crash get
  std::chrono::milliseconds status_grace{1000};  ///< how long watchdogs get to answer
  std::size_t log_tail_bytes = 16 * 1024;
  /// Set in every rank's environment (replay re-applies a run's recorded variables). The ranks
  /// always get NCCL_NVLS_ENABLE=0 on top: NVLink multicast stays off.
  std::vector<std::pair<std::string, std::string>> env;
  /// Readable when the caller wants to stop (InterruptWatch::fd(); -1: never). Never read, so it
  /// stays readable: the running execution ends at once (its ranks killed and reaped, its world
  /// and the world's directory gone) and every later run() returns at once; both are `error`
  /// results with ExecutionResult::interrupted set.
  int stop_fd = -1;
  /// Ranks time every op and allocation (CaseCapture::timeline) for a trace (--trace).
  bool timeline = false;
  /// How worlds' ranks are started (--launcher): local children or through mpirun/srun.
  LaunchOptions launch;
  /// The controller's clock for deadlines and wall times; tests pass a fake one. The worlds keep
  /// the steady clock for their own waits.
  std::function<Clock::time_point()> now = Clock::now;
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
  /// Shuts every pooled world down.
  void close_pools();

 private:
  WorldHandle& world_for(const CaseInstance& inst, Mode mode, std::unique_ptr<WorldHandle>& fresh,
                         ExecutionResult& res);
  std::chrono::milliseconds deadline_for(const CaseInstance& inst) const;
  /// Judges the collected reports (cprr::classify) and does the I/O the judgement calls for.
  void classify(ExecutionResult& res, WorldHandle& world);

  ControllerConfig config_;
  std::unique_ptr<WorldFactory> worlds_;
  std::map<int, std::unique_ptr<WorldHandle>> pools_;
  std::map<uint64_t, uint64_t> served_;  // world id -> cases run
  uint64_t next_world_ = 1;
  uint64_t next_execution_ = 1;
};

}  // namespace cprr

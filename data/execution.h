#pragma once
// The execution vocabulary: what one execution of a case produced, as plain data. The engine fills
// it, analysis/ judges it, schema/ stores and reads it back, the verbs print it. Nothing here is a
// wire message (recorder/protocol/ wraps RankResult for the wire) and nothing here does I/O.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/capture.h"
#include "data/case_info.h"
#include "runtime/backend.h"
#include "runtime/startup_phases.h"

namespace cprr {

/// How a case instance is run: in a fresh world of its own, or in the pooled world of its size.
enum class Mode : uint8_t { fresh, pool };

/// How an execution ended, across all its ranks.
enum class ExecStatus : uint8_t {
  pass,   ///< every rank ran the case to completion without failure
  fail,   ///< a rank's body failed (CPRR_EXPECT or an exception)
  crash,  ///< a rank died, or its control channel broke mid-case (RankReport::protocol_error)
  hang,   ///< the deadline passed with a rank still running
  error,  ///< infrastructure: world did not start, worker not spawned, unknown case, interrupted
  skip,   ///< every rank skipped the case (unittest.SkipTest, pytest.skip, Context::skip)
};

/// How a rank's part of a case ended, as the rank itself saw it.
enum class RankOutcome : uint8_t {
  ok,     ///< body returned, streams drained, captures hashed
  fail,   ///< the body threw (a failed CPRR_EXPECT or any exception)
  error,  ///< the harness failed inside the rank (e.g. unknown case name, a broken backend)
  skip,   ///< the body skipped the case (RankResult::error holds its reason)
};

/// A rank's result for one execution, as it reported it.
struct RankResult {
  uint64_t execution = 0;  ///< the execution it belongs to (the controller checks it)
  RankOutcome outcome = RankOutcome::ok;
  std::string error;
  double reset_ms = 0;
  double body_ms = 0;
  CaseCapture capture;
  /// Start-up the rank's backend left to its first use and paid in this case (CUDA with NCCL:
  /// the wait for the communicator, the symmetric arena and window); not stored.
  std::vector<StartupPhase> first_use;
  /// Backend::symmetric_pool() after the case: the pool may be made in it; not stored.
  std::string symmetric_pool;
  /// Non-empty: why the world's transport may be broken after this case (a call of the case's
  /// library into it raised), so the world is not reused; not stored.
  std::string distrusted;

  bool operator==(const RankResult&) const = default;
  template <class A>
  void serialize(A& a) {
    a(execution, outcome, error, reset_ms, body_ms, capture, first_use, symmetric_pool, distrusted);
  }
};

/// A rank's watchdog answer: enough to tell which rank never joined which collective.
struct WatchdogStatus {
  uint64_t execution = 0;    ///< execution being run, 0 when idle
  std::string phase;         ///< idle | reset | body | drain | capture
  int64_t entered_seq = -1;  ///< last collective this rank's streams started (-1: none)
  std::string entered_kind;
  int64_t completed_seq = -1;  ///< last collective that completed on this rank
  std::string completed_kind;
  std::vector<std::string> running;  ///< "stream <id> (<name>): <op label>" per busy stream

  bool operator==(const WatchdogStatus&) const = default;
  template <class A>
  void serialize(A& a) {
    a(execution, phase, entered_seq, entered_kind, completed_seq, completed_kind, running);
  }
};

/// How a child process ended.
struct ExitInfo {
  int exit_code = -1;  ///< valid when signal == 0
  int signal = 0;      ///< terminating signal, 0 when it exited
  bool operator==(const ExitInfo&) const = default;
  template <class A>
  void serialize(A& a) {
    a(exit_code, signal);
  }
  /// "exited with code 2" / "killed by signal 11 (SIGSEGV)".
  std::string describe() const;
};

/// What the controller learned about one rank during one execution.
struct RankReport {
  std::optional<RankResult> done;
  std::optional<WatchdogStatus> watchdog;
  std::optional<ExitInfo> exit;  ///< set when the rank died
  std::string protocol_error;
  std::string stdout_tail;
  std::string stderr_tail;
  /// A rank without a result: the collectives it had entered, from its flight record
  /// (data/flight_record.h). Empty for a rank that reported (its capture has them).
  std::vector<CollectiveRecord> entered;

  bool operator==(const RankReport&) const = default;
};

/// One execution of one case instance: every rank's report and the judgement of the whole.
struct ExecutionResult {
  uint64_t id = 0;
  uint32_t case_id = 0;
  std::string label;
  Mode mode = Mode::pool;
  int attempt = 1;             ///< 1-based repeat number (set by the caller running repeats)
  uint64_t world_id = 0;       ///< which world ran it (0: none started)
  uint64_t pool_position = 0;  ///< 1-based position among the cases this world ran
  ExecStatus status = ExecStatus::error;
  bool as_expected = false;
  std::string summary;  ///< one line: what went wrong and where
  std::string note;     ///< harness remark, e.g. why the pooled world was replaced first
  std::vector<RankReport> ranks;
  std::chrono::system_clock::time_point started_at{};  ///< wall-clock time of dispatch
  double wall_ms = 0;                                  ///< dispatch to classified result
  /// The world's start (0 when reused); included in wall_ms, except what a standby world's
  /// start overlapped with earlier cases (Controller::foresee).
  double startup_ms = 0;
  /// Where the world's start went (empty when reused): the engine's world_startup_phases.
  std::vector<StartupPhase> startup_phases;
  /// Start-up paid inside this case at first use (the slowest rank's), in wall_ms, not in
  /// startup_ms: a world that starts only what its cases use (runtime/cuda_backend.h).
  std::vector<StartupPhase> first_use_phases;
  /// What the world's ranks said their symmetric pool is (Backend::symmetric_pool; CUDA: whether
  /// it is an NCCL window registered for symmetric collectives); empty when no world ran it.
  std::string symmetric_pool;
  /// How the world's collectives travelled: "nccl" (cuda, a GPU per rank), "gloo_staged" (cuda
  /// through Gloo, device buffers staged through pinned host memory: ranks share a GPU, or
  /// --collectives gloo), "gloo" (the cpu backend); empty when no world ran it. Results across
  /// two transports may differ by reduction order without any bug (kCollectives* below).
  std::string collectives;
  /// The GPU each rank ran on, in rank order ("0,0,0,0": four ranks sharing visible GPU 0; a
  /// launcher's ranks name their host's GPU index); empty on cpu and when no world ran it.
  std::string rank_gpus;
  /// Where the world ran (cprecord --jobs gives each job its own): "cpus 0-3" on cpu, "gpus
  /// GPU-<uuid>,..." (or indexes where no UUID is known) on cuda; empty when not placed (one
  /// job with every core and GPU) or when no world ran it.
  std::string devices;
  /// The MASTER_PORT its world's ranks got (CPRR_MASTER_PORT: a port the run claimed for the
  /// controller, recorder/launch/port_claim.h); 0 when none was set.
  int master_port = 0;
  /// The stop descriptor ended (or prevented) this execution: its status is `error` and it
  /// says nothing about the case. Callers stop their loop and should not count it.
  bool interrupted = false;

  bool operator==(const ExecutionResult&) const = default;
};

/// ExecutionResult::collectives values.
inline constexpr std::string_view kCollectivesNccl = transport_name(CollectiveTransport::nccl);
inline constexpr std::string_view kCollectivesGlooStaged =
    transport_name(CollectiveTransport::gloo_staged);
inline constexpr std::string_view kCollectivesGloo = transport_name(CollectiveTransport::gloo);

/// True when `a` and `b` both ran a world and their collectives took different transports: their
/// outputs may differ by reduction order (float sums) with no bug in the case.
bool across_transports(const ExecutionResult& a, const ExecutionResult& b);

/// The groups other than the world the ranks of `e` recorded, by id and ranks, each once (the
/// first rank's record of it).
std::vector<GroupRecord> groups_of(const ExecutionResult& e);

/// Whether an execution with status `s` meets the case's expectation.
bool meets(ExecStatus s, Expect e);

}  // namespace cprr

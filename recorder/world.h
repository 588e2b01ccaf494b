#pragma once
// A world: W rank processes of one worker binary, in their own process group, each with a private
// control socket and drained stdout/stderr pipes. Fresh mode makes one per case; pool mode keeps
// one per world size and replaces it after any fault.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "recorder/log_drain.h"
#include "recorder/process.h"
#include "recorder/protocol.h"
#include "runtime/fd.h"

namespace cprr {

using Clock = std::chrono::steady_clock;

struct WorldConfig {
  std::string worker;                 ///< path of the worker binary
  std::string backend = "cpu";
  int world_size = 2;
  std::chrono::milliseconds startup_timeout{60000};
  std::size_t log_tail_bytes = 64 * 1024;
  /// Set in every rank's environment on top of the controller's. NCCL_NVLS_ENABLE=0 always wins:
  /// an entry turning NVLink multicast on is dropped.
  std::vector<std::pair<std::string, std::string>> env;
};

/// What the controller learned about one rank during one execution.
struct RankReport {
  std::optional<CaseDone> done;
  std::optional<WatchdogStatus> watchdog;
  std::optional<ExitInfo> exit;       ///< set when the rank died
  std::string protocol_error;
  std::string stdout_tail;
  std::string stderr_tail;
};

class World {
 public:
  /// Spawns the ranks and waits until every rank said hello and joined the communicator
  /// (await_ready). Throws cprr::Error naming the rank, how it
  /// ended and its stderr tail when the world cannot start.
  World(const WorldConfig& config, uint64_t id);
  /// Asks healthy ranks to shut down, then kills the group and reaps every rank.
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  uint64_t id() const { return id_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  /// False once a rank died, hung or broke the protocol: the world must be replaced.
  bool reusable() const { return reusable_; }
  /// Checks an idle world before reuse: a rank that exited, closed its control channel or sent
  /// something unasked since the last case. Returns what happened (the world must be replaced),
  /// so a death between cases is never blamed on the next case.
  std::optional<std::string> idle_fault();
  /// Time it took to spawn and connect every rank.
  double startup_ms() const { return startup_ms_; }

  /// Sends the case to every rank and marks the log positions for its tails.
  void start(const RunCase& msg);
  /// Waits for every rank's CaseDone for `execution` until `deadline`. A rank that dies ends
  /// its wait; once one died, the others get at most `after_death` more.
  std::vector<RankReport> collect(uint64_t execution, Clock::time_point deadline,
                                  std::chrono::milliseconds after_death);
  /// Asks ranks without a result for their watchdog status, waiting at most `grace`.
  void query_status(uint64_t execution, std::vector<RankReport>& reports,
                    std::chrono::milliseconds grace);
  /// TERM, then KILL after `grace`, to the whole group; reaps all ranks; marks not reusable.
  void kill(std::chrono::milliseconds grace);
  /// Fills each report's stdout/stderr tails with what the ranks wrote since start().
  void fill_tails(std::vector<RankReport>& reports);

 private:
  struct Rank {
    ChildProcess process;
    UniqueFd control;
    FrameReader reader;
    bool eof = false;
    uint64_t out_mark = 0;
    uint64_t err_mark = 0;
  };
  void spawn_rank(int rank, const WorldConfig& config);
  /// Start-up: every rank's hello, then Bootstrap with rank 0's communicator id, then every
  /// rank's Connected, all within config.startup_timeout; throws naming the rank that failed.
  void await_ready(const WorldConfig& config);
  /// Hands one frame from each rank, in arrival order, to `on_frame`; throws `timeout_why` (with
  /// the first silent rank's stderr) at the deadline.
  void await_each(Clock::time_point deadline, const std::string& timeout_why,
                  const std::function<void(int, const std::string&)>& on_frame);
  /// Reads what rank r's control socket holds into reports[r]; false on EOF.
  bool pump(int r, uint64_t execution, RankReport& report);
  std::string startup_failure(int rank, const std::string& why);

  uint64_t id_;
  std::string rendezvous_;
  pid_t group_ = 0;
  std::vector<Rank> ranks_;
  LogDrain logs_;
  bool reusable_ = true;
  double startup_ms_ = 0;
};

}  // namespace cprr

#pragma once
// Child processes of the controller: spawned with posix_spawn (argv, no shell) into a process
// group, reaped by an RAII owner so no rank is ever left behind.
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "recorder/data/execution.h"

namespace cprr {

struct SpawnSpec {
  std::vector<std::string> argv;  ///< argv[0] is the executable path
  /// (parent fd, child fd): dup2'ed in the child. Above stderr the child holds only these: what
  /// the parent holds without close-on-exec (inherited from its own parent) stays out.
  std::vector<std::pair<int, int>> fds;
  pid_t process_group = 0;                               ///< 0: the child leads a new group
  std::vector<std::pair<std::string, std::string>> env;  ///< set on top of the parent's environment
  /// argv[0] without a '/' is looked up on PATH (a launcher); else it is a path (a worker).
  bool search_path = false;
};

/// The executable `name` resolves to on PATH (as posix_spawnp would find it); "" when none.
std::string find_on_path(const std::string& name);

/// An owned child process. Destruction kills (SIGKILL) and reaps it if it still runs.
class ChildProcess {
 public:
  ChildProcess() = default;
  /// Spawns; throws cprr::Error naming the executable on failure (e.g. --worker not found).
  static ChildProcess spawn(const SpawnSpec& spec);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exit_; }
  /// Non-blocking reap; the exit info once the child has ended.
  const std::optional<ExitInfo>& poll();
  /// Reaps, waiting at most `timeout_ms` (-1: forever).
  const std::optional<ExitInfo>& wait(int timeout_ms);
  /// The exit info if reaped.
  const std::optional<ExitInfo>& exit() const { return exit_; }

 private:
  pid_t pid_ = -1;
  std::optional<ExitInfo> exit_;
};

/// Sends `sig` to every process of group `pgid` (ESRCH is not an error).
void signal_group(pid_t pgid, int sig);

}  // namespace cprr

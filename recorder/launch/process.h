#pragma once
// Child processes of the controller: spawned with posix_spawn (argv, no shell) into a process
// group, or forked by a template process and reparented here (recorder/launch/rank_spawner.h),
// reaped by an RAII owner so no rank is ever left behind.
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/execution.h"

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

/// The complete environment `spec` gives its child ("NAME=value" entries): this process's, with
/// spec.env set on top. A template process forks ranks with exactly this (fork_request.h).
std::vector<std::string> child_environment(const SpawnSpec& spec);

class ChildArrival;

/// An owned child process. Destruction kills (SIGKILL) and reaps it if it still runs. An ended
/// child stays a zombie until reap() or destruction: its pid, and so the id of the process group
/// it leads, cannot be reused meanwhile, so signalling that group never reaches a stranger.
class ChildProcess {
 public:
  ChildProcess() = default;
  /// Spawns; throws cprr::Error naming the executable on failure (e.g. --worker not found).
  static ChildProcess spawn(const SpawnSpec& spec);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  /// It has not ended (or its end is not known yet).
  bool running() const { return pid_ > 0 && !exit_; }
  /// It is not reaped: running or a zombie, it holds its pid and its group's id.
  bool held() const { return pid_ > 0 && !reaped_; }
  /// Non-blocking; the exit info once the child has ended (it is not reaped).
  const std::optional<ExitInfo>& poll();
  /// Waits at most `timeout_ms` (-1: forever) for its end (it is not reaped).
  const std::optional<ExitInfo>& wait(int timeout_ms);
  /// The exit info if it has ended.
  const std::optional<ExitInfo>& exit() const { return exit_; }
  /// Reaps it if it has ended (its pid is free from then on); a no-op while it runs.
  void reap();
  /// Sends `sig` to the process group this child leads, while it is held(); a no-op after.
  void signal_group(int sig);

 private:
  friend class ChildArrival;
  /// Owns `pid`, already a child of this process and registered as owned (ChildArrival::take).
  explicit ChildProcess(pid_t pid) : pid_(pid) {}

  pid_t pid_ = -1;
  std::optional<ExitInfo> exit_;
  bool reaped_ = false;
};

class ChildArrival {
 public:
  ChildArrival();
  ~ChildArrival();
  ChildArrival(const ChildArrival&) = delete;
  ChildArrival& operator=(const ChildArrival&) = delete;
  /// Owns `pid`, which must be a child of this process now (spawned, or adopted after the
  /// process that forked it exited). Once per arrival.
  ChildProcess take(pid_t pid);

 private:
  bool taken_ = false;
};

/// Makes this process a child subreaper (PR_SET_CHILD_SUBREAPER), once: an orphaned descendant
/// is reparented here instead of to init, so a rank a template process forked (and whose parent,
/// the template's intermediate child, exited at once) is this process's child, which waitpid()
/// and ChildProcess need. Throws cprr::Error when the kernel refuses.
void become_subreaper();

/// Reaps every child that has ended and that no ChildProcess owns: what a subreaper inherits
/// besides its ranks (a case's own children that outlived their rank, a template's intermediate
/// child when the template died). A no-op until become_subreaper(), and while a child is
/// arriving (the next call reaps what this one left). Never touches an owned child's status.
/// Returns how many it reaped.
int reap_orphans();

/// The live children of this process that no ChildProcess owns, in process group `group` (any
/// group when -1): orphans this subreaper took in (a case's process whose rank ended), or, in a
/// process that is no subreaper, children made by other means. Empty while a child is arriving:
/// it cannot be told from an orphan yet.
std::vector<pid_t> unowned_children(pid_t group = -1);

/// unowned_children(group), each followed by its live descendants: what a subreaper ends when
/// it ends what its children left behind.
std::vector<pid_t> unowned_trees(pid_t group = -1);

/// Sends `sig` to every process of group `pgid` (ESRCH is not an error). Only while a member of
/// it is known to be unreaped (ChildProcess::held): else the id may be a stranger's group by now.
void signal_group(pid_t pgid, int sig);

}  // namespace cprr

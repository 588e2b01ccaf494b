#pragma once
// Processes as /proc shows them: a process's descendants, its state and process group, its
// command line. What a rank leaves behind after a case (a process the case forked, a helper a
// library started) is found this way and ended, so nothing a case starts outlives its world.
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cprr {

/// What /proc/PID/stat says of a process.
struct ProcStat {
  char state = '?';  ///< R, S, D, Z (zombie), T, ...
  pid_t ppid = 0;
  pid_t pgrp = 0;
};

/// nullopt when there is no such process (any more).
std::optional<ProcStat> proc_stat(pid_t pid);

/// The live descendants of `pid` (not itself; zombies left out), each before its own children:
/// every thread's children (/proc/PID/task/TID/children), recursively. One forked while they
/// are read may be missed: the next look finds it.
std::vector<pid_t> descendants(pid_t pid);

/// Its command line, arguments joined by spaces, cut to `max` characters (with "..."); its
/// name in brackets when it has none (a kernel thread's form); "" when it is gone.
std::string command_line(pid_t pid, std::size_t max = 60);

/// The id of the process or thread created last on this host (/proc/loadavg's last field);
/// nullopt when it cannot be read. While it stays the same nothing has forked, so a look for new
/// processes can be skipped: what makes end_leftovers cost next to nothing per pooled case.
std::optional<pid_t> last_created_pid();

/// SIGKILLs each of `pids` (one already gone is skipped).
void kill_each(const std::vector<pid_t>& pids);

/// Names each of `pids` ("pid 4242 (sleep 100)", joined by ", "), then SIGKILLs them: what a
/// report says of the processes it ended.
std::string kill_and_name(const std::vector<pid_t>& pids);

}  // namespace cprr

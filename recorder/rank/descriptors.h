#pragma once
// Which of the rank's descriptors a program it execs may inherit. A rank's own libraries open
// descriptors without close-on-exec (Gloo's sockets and epoll instance when the backend connects;
// NCCL's proxy and peer sockets, lazily, at whatever collective first needs them), and a case that
// runs a program (system(), a launcher of its own, a compiler) would hand them on: the program
// then holds the rank's sockets, so a dead rank's peers see no EOF, and a port outlives the world.
#include <vector>

namespace cprr {

/// The descriptors the rank inherited (stdio, and whatever its launcher passed on purpose),
/// taken at start-up; every later one is the rank's own and is made close-on-exec by
/// close_on_exec_rest() after the backend connects and after every case.
class InheritedDescriptors {
 public:
  /// The descriptors open now.
  static InheritedDescriptors capture();

  /// Sets FD_CLOEXEC on every open descriptor not captured: a few close_range() calls
  /// (CLOSE_RANGE_CLOEXEC, Linux 5.11), or a walk of /proc/self/fd on older kernels. A case's own
  /// descriptor that outlives its case is flagged too: from then on it is state the case leaked.
  void close_on_exec_rest() const;

  const std::vector<int>& fds() const { return fds_; }

 private:
  std::vector<int> fds_;  ///< sorted
};

}  // namespace cprr

#pragma once
// Ctrl-C for the CLIs. While an InterruptWatch lives, SIGINT, SIGTERM and SIGHUP no longer end the
// process: the first one makes fd() readable. Passed as ControllerConfig::stop_fd, that ends the
// running execution at once (its ranks killed and reaped, its world's directory removed) and every
// later run() returns at once, both as results with `interrupted` set; the CLI then finishes its
// record and report and exits (conventionally 128 + signal()). A second signal of the same kind
// has its default effect again (SA_RESETHAND): a user who presses Ctrl-C twice is not kept waiting.
#include <signal.h>

#include <array>
#include <atomic>

#include "runtime/fd.h"

namespace cprr {

class InterruptWatch {
 public:
  /// Installs the handlers. Throws cprr::Error if another InterruptWatch is alive (a signal has
  /// one handler per process).
  InterruptWatch();
  /// Restores the dispositions it replaced; waits out a handler running on another thread.
  ~InterruptWatch();
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

  /// Readable from the first signal on, and never drained: poll it, do not read it.
  int fd() const { return read_.get(); }
  /// 0 until a signal arrived, then the first one's number (SIGINT, SIGTERM or SIGHUP).
  int signal() const { return signal_.load(); }

 private:
  static void handle(int sig);

  UniqueFd read_;
  UniqueFd write_;
  std::atomic<int> signal_{0};
  std::array<struct sigaction, 3> previous_{};
};

}  // namespace cprr

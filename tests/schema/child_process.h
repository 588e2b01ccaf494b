#pragma once
// Child processes for the store suites: what several cprecord processes sharing one database
// file do at once (concurrent writers, a schema created or migrated by two processes).
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <functional>
#include <stdexcept>

namespace cprr::samples {

/// Forks a child running `body`; it exits 0 when body returns, 1 (message on stderr) on an
/// exception. The parent must hold no open Database across the fork.
inline pid_t spawn(const std::function<void()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int code = 0;
    try {
      body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", static_cast<int>(::getpid()), e.what());
      code = 1;
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  return pid;
}

inline int wait_status(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

/// A gate that releases every child blocked in wait() at once, so they really overlap.
class StartGate {
 public:
  StartGate() {
    if (::pipe(fds_) != 0) throw std::runtime_error("pipe failed");
  }
  ~StartGate() {
    close_fd(fds_[0]);
    close_fd(fds_[1]);
  }
  /// In a child: blocks until the parent opens the gate.
  void wait() {
    close_fd(fds_[1]);
    char c;
    while (::read(fds_[0], &c, 1) < 0 && errno == EINTR) {
    }
  }
  /// In the parent: releases every waiting child (the read sees end of file).
  void open() { close_fd(fds_[1]); }

 private:
  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  int fds_[2] = {-1, -1};
};

}  // namespace cprr::samples

#include "recorder/launch/interrupt.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "runtime/error.h"

namespace cprr {
namespace {

constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};

// The state a signal handler unavoidably needs: a handler gets only the signal number, so it
// finds the live watch through this pointer. `handlers_running` lets the destructor wait until no
// handler still uses the watch it is about to free. Both are lock-free atomics (signal-safe).
std::atomic<InterruptWatch*> live_watch{nullptr};
std::atomic<int> handlers_running{0};

}  // namespace

void InterruptWatch::handle(int sig) {
  const int saved_errno = errno;
  handlers_running.fetch_add(1);
  if (InterruptWatch* w = live_watch.load()) {
    int none = 0;
    w->signal_.compare_exchange_strong(none, sig);
    const char byte = 1;
    [[maybe_unused]] const ssize_t n =
        ::write(w->write_.get(), &byte, 1);  // full pipe: still readable
  }
  handlers_running.fetch_sub(1);
  errno = saved_errno;
}

InterruptWatch::InterruptWatch() {
  int p[2];
  CPRR_SYSCALL(::pipe2(p, O_CLOEXEC | O_NONBLOCK));
  read_.reset(p[0]);
  write_.reset(p[1]);
  InterruptWatch* none = nullptr;
  CPRR_CHECK(live_watch.compare_exchange_strong(none, this),
             "only one InterruptWatch may be alive at a time");
  struct sigaction sa {};
  sa.sa_handler = &InterruptWatch::handle;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: the controller's syscalls go on; it notices the signal by polling fd().
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  for (std::size_t k = 0; k < kSignals.size(); ++k) {
    if (::sigaction(kSignals[k], &sa, &previous_[k]) != 0) {
      const int err = errno;
      for (std::size_t j = 0; j < k; ++j) ::sigaction(kSignals[j], &previous_[j], nullptr);
      live_watch.store(nullptr);
      errno = err;
      throw_errno(__FILE__, __LINE__, "sigaction");
    }
  }
}

InterruptWatch::~InterruptWatch() {
  for (std::size_t k = 0; k < kSignals.size(); ++k)
    ::sigaction(kSignals[k], &previous_[k], nullptr);
  live_watch.store(nullptr);
  while (handlers_running.load() != 0) std::this_thread::yield();
}

}  // namespace cprr

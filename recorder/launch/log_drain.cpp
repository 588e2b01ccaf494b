#include "recorder/launch/log_drain.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "runtime/error.h"

namespace cprr {

LogDrain::~LogDrain() {
  stop_.store(true);
  if (wake_write_) {
    const char b = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_write_.get(), &b, 1);
  }
  if (thread_.joinable()) thread_.join();
}

int LogDrain::add(UniqueFd fd) {
  CPRR_SYSCALL(::fcntl(fd.get(), F_SETFL, O_NONBLOCK));
  // A larger pipe means fewer wake-ups while a rank floods; failure only costs speed.
  ::fcntl(fd.get(), F_SETPIPE_SZ, 1 << 20);
  std::lock_guard lock(mu_);
  pipes_.push_back(Pipe{std::move(fd), ByteRing(ring_bytes_)});
  return static_cast<int>(pipes_.size()) - 1;
}

void LogDrain::start() {
  int fds[2];
  CPRR_SYSCALL(::pipe2(fds, O_CLOEXEC | O_NONBLOCK));
  wake_read_.reset(fds[0]);
  wake_write_.reset(fds[1]);
  thread_ = std::thread([this] { run(); });
}

bool LogDrain::read_some(Pipe& p) {
  char buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(p.fd.get(), buf, sizeof buf);
    if (n > 0) {
      p.ring.append(std::string_view(buf, static_cast<std::size_t>(n)));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    p.fd.reset();  // EOF or a dead pipe: nothing more will come
    return false;
  }
}

void LogDrain::run() {
  std::vector<pollfd> fds;
  std::vector<int> index;
  while (!stop_.load()) {
    fds.clear();
    index.clear();
    {
      std::lock_guard lock(mu_);
      for (std::size_t i = 0; i < pipes_.size(); ++i) {
        if (!pipes_[i].fd) continue;
        fds.push_back(pollfd{pipes_[i].fd.get(), POLLIN, 0});
        index.push_back(static_cast<int>(i));
      }
    }
    if (fds.empty()) return;
    fds.push_back(pollfd{wake_read_.get(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    std::lock_guard lock(mu_);
    for (std::size_t k = 0; k + 1 < fds.size(); ++k) {
      Pipe& p = pipes_[index[k]];
      if (p.fd && (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0) read_some(p);
    }
  }
}

void LogDrain::drain_now() {
  std::lock_guard lock(mu_);
  for (Pipe& p : pipes_) {
    while (p.fd) {
      const uint64_t before = p.ring.total();
      if (!read_some(p) || p.ring.total() == before) break;
    }
  }
}

uint64_t LogDrain::mark(int idx) const {
  std::lock_guard lock(mu_);
  return pipes_.at(idx).ring.total();
}

std::string LogDrain::since(int idx, uint64_t mark) const {
  std::lock_guard lock(mu_);
  return pipes_.at(idx).ring.since(mark);
}

void LogDrain::wait_eof(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    drain_now();
    bool open = false;
    {
      std::lock_guard lock(mu_);
      for (const Pipe& p : pipes_) open = open || p.fd.valid();
    }
    if (!open || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace cprr

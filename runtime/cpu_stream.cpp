#include "runtime/cpu_stream.h"

#include <system_error>
#include <utility>

#include "runtime/error.h"

namespace cprr {
namespace {

/// Runs one op; returns what it threw (null when it returned normally).
std::exception_ptr run_op(const std::function<void()>& op) {
  try {
    op();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

CpuStream::CpuStream(int id, std::string name) : id_(id), name_(std::move(name)) {}

CpuStream::~CpuStream() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // A pending error_ is dropped here: a destructor cannot throw, and owners synchronize() before
  // destroying a stream whose errors they care about.
}

uint64_t CpuStream::enqueue(std::string label, std::function<void()> op) {
  CPRR_CHECK(op != nullptr, "stream {} ({}): enqueue of '{}' without a callable", id_, name_,
             label);
  bool was_empty = false;
  uint64_t ticket = 0;
  {
    std::lock_guard lock(mu_);
    // While stopping, the running thread still drains what its own ops enqueue; a thread started
    // now would race the destructor's join.
    CPRR_CHECK(!stopping_ || thread_.joinable(),
               "stream {} ({}): enqueue of '{}' while the stream is being destroyed", id_, name_,
               label);
    if (!thread_.joinable()) {
      // Lazy start: most streams of a case never get work, and a thread per idle stream would
      // cost more than the whole dispatch budget.
      try {
        thread_ = std::thread([this] { run(); });
      } catch (const std::system_error& e) {
        CPRR_THROW("stream {} ({}): starting the stream thread: {}", id_, name_, e.what());
      }
    }
    was_empty = queue_.empty();
    queue_.push_back(Item{std::move(label), std::move(op)});
    ticket = ++enqueued_;
  }
  // The worker only sleeps when the queue is empty, so a push onto a non-empty queue needs no
  // wake-up; cv_ is shared with ticket waiters, hence notify_all (notify_one could wake a waiter
  // instead of the worker and lose the signal).
  if (was_empty) cv_.notify_all();
  return ticket;
}

uint64_t CpuStream::last_ticket() const {
  std::lock_guard lock(mu_);
  return enqueued_;
}

uint64_t CpuStream::done_ticket() const {
  std::lock_guard lock(mu_);
  return done_;
}

void CpuStream::wait_for(uint64_t ticket) const {
  std::unique_lock lock(mu_);
  // A ticket that was never handed out would never complete: fail instead of hanging.
  CPRR_CHECK(ticket <= enqueued_, "stream {} ({}): wait_for ticket {} but only {} ops enqueued",
             id_, name_, ticket, enqueued_);
  cv_.wait(lock, [&] { return done_ >= ticket; });
}

void CpuStream::synchronize() {
  std::exception_ptr error;
  {
    std::unique_lock lock(mu_);
    const uint64_t target = enqueued_;
    // Fast path (nothing pending) takes no wait and wakes nobody.
    if (done_ < target) cv_.wait(lock, [&] { return done_ >= target; });
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

std::string CpuStream::current_op() const {
  std::lock_guard lock(mu_);
  return current_;
}

void CpuStream::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    // Queued ops still run after stopping_ is set: the destructor promises to drain the queue.
    if (queue_.empty()) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    // After a failure the rest are skipped (not run) until synchronize() takes the error, so ops
    // that depend on the failed one never see half-done state.
    const bool skip = error_ != nullptr;
    if (!skip) current_ = item.label;
    lock.unlock();
    std::exception_ptr failure = skip ? nullptr : run_op(item.op);
    // Destroy the callable (and what it captured) outside the lock, so a captured destructor may
    // use the stream, and before the ticket completes, so a waiter may free what the op used.
    item = Item{};
    lock.lock();
    current_.clear();
    if (failure && !error_) error_ = std::move(failure);
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace cprr

#pragma once
// The CPU backend's stream: one thread running a FIFO of ops, with tickets for event ordering.
// Like a CUDA stream, enqueue returns at once and the op runs later, so host code that touches a
// buffer before the stream reached it races exactly as it would on a GPU.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace cprr {

/// A FIFO of ops executed in order by one thread (started lazily on the first enqueue).
/// Tickets number the ops 1, 2, ...; an op's ticket is "done" when it has run (or was skipped
/// because an earlier op failed). Thread-safe: any thread may enqueue, wait or synchronize.
class CpuStream {
 public:
  CpuStream(int id, std::string name);
  /// Runs the ops still queued, then joins the thread.
  ~CpuStream();
  CpuStream(const CpuStream&) = delete;
  CpuStream& operator=(const CpuStream&) = delete;

  int id() const { return id_; }
  const std::string& name() const { return name_; }

  /// Appends an op; returns its ticket. `label` names the op for the watchdog ("kernel fill").
  uint64_t enqueue(std::string label, std::function<void()> op);
  /// Ticket of the last enqueued op (0 when none was ever enqueued).
  uint64_t last_ticket() const;
  /// Ticket of the last finished op.
  uint64_t done_ticket() const;
  /// Blocks the caller until op `ticket` is done. Returns at once for ticket 0.
  void wait_for(uint64_t ticket) const;
  /// Blocks until every op enqueued so far is done, then rethrows the first error an op raised
  /// since the last synchronize (clearing it). After an op throws, later ops are skipped (their
  /// tickets still complete) until the error is taken, so waiters never deadlock.
  void synchronize();
  /// Label of the op running now; empty when idle. For the hang watchdog.
  std::string current_op() const;

 private:
  struct Item {
    std::string label;
    std::function<void()> op;
  };
  void run();

  const int id_;
  const std::string name_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;  // signals both "queue non-empty" and "ticket done"
  std::deque<Item> queue_;
  uint64_t enqueued_ = 0;
  uint64_t done_ = 0;
  std::string current_;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread thread_;  // last member: started lazily, joined in the destructor
};

/// A point in a stream's order: done once the stream's op with `ticket` is done.
struct CpuEvent {
  const CpuStream* stream = nullptr;
  uint64_t ticket = 0;
};

}  // namespace cprr

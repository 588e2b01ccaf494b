#pragma once
// Commits executions on a writer thread, so that dispatching the next case never waits for the
// disk (the store is most of what recording costs per execution). Each execution is
// still its own transaction (RecordWriter::write), committed in the order submitted.
//
// What is in the store, and when:
//  - drain() returns once every submitted execution is committed. cprecord drains before it judges
//    the run on every way out of its case loop (the plan done, --fail-fast, Ctrl-C / SIGTERM /
//    SIGHUP), so the summary, the judgement rows and the run's exit code come after every result.
//  - A recorder killed outright (SIGKILL, a second Ctrl-C, a crash) leaves every execution whose
//    transaction committed. Lost are at most the max_queued executions that had finished running
//    but were still queued; the run stays marked incomplete.
//  - A write that fails stops the queue: nothing later is written, and the next submit() or
//    drain() rethrows that error (the store is unusable, which cprecord reports as exit 2).
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "data/execution.h"

namespace cprr {

class RecordWriter;

/// How many finished executions may wait for the writer thread before submit() blocks: enough to
/// ride out a slow commit (a WAL checkpoint), few enough that a SIGKILL loses little.
inline constexpr std::size_t kMaxQueuedExecutions = 4;

class RecordQueue {
 public:
  /// Writes one execution of a case; RecordWriter::write in cprecord, a fake in tests.
  using Sink = std::function<void(const ExecutionResult&, int64_t case_id)>;

  /// Commits through `writer`, which only the queue's thread touches until drain() returned or the
  /// queue is gone.
  explicit RecordQueue(RecordWriter& writer, std::size_t max_queued = kMaxQueuedExecutions);
  explicit RecordQueue(Sink sink, std::size_t max_queued = kMaxQueuedExecutions);
  /// Commits what is still queued (unless a write failed), then joins the thread. Never throws:
  /// call drain() where an error must be seen.
  ~RecordQueue();
  RecordQueue(const RecordQueue&) = delete;
  RecordQueue& operator=(const RecordQueue&) = delete;

  /// Queues `result` for `case_id`. It is kept by address, not copied (its captures can be
  /// large): it must stay alive and unchanged until drain() returned or the queue is gone. Blocks
  /// while max_queued executions wait. Rethrows an earlier write's error.
  void submit(const ExecutionResult& result, int64_t case_id);
  /// Blocks until every submitted execution is committed; rethrows the first write error.
  void drain();

 private:
  struct Item {
    const ExecutionResult* result;
    int64_t case_id;
  };
  void loop();

  Sink sink_;
  std::size_t max_queued_;
  std::mutex mu_;
  std::condition_variable changed_;  // an item queued or committed, or closing
  std::deque<Item> queue_;           // the front stays until committed: drain() waits for it
  bool closing_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: it starts once every member above exists
};

}  // namespace cprr

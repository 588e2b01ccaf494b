#include "schema/record_queue.h"

#include "runtime/error.h"
#include "schema/record_writer.h"

namespace cprr {
namespace {

// Checked before the thread starts: a constructor throwing after it would terminate the process.
std::size_t at_least_one(std::size_t max_queued) {
  CPRR_CHECK(max_queued > 0, "a record queue needs room for at least one execution");
  return max_queued;
}

}  // namespace

RecordQueue::RecordQueue(RecordWriter& writer, std::size_t max_queued)
    : RecordQueue(
          [&writer](const ExecutionResult& r, int64_t case_id) { writer.write(r, case_id); },
          max_queued) {}

RecordQueue::RecordQueue(Sink sink, std::size_t max_queued)
    : sink_(std::move(sink)), max_queued_(at_least_one(max_queued)), thread_([this] { loop(); }) {}

RecordQueue::~RecordQueue() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void RecordQueue::submit(const ExecutionResult& result, int64_t case_id) {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return error_ || queue_.size() < max_queued_; });
  if (error_) std::rethrow_exception(error_);
  queue_.push_back(Item{&result, case_id});
  changed_.notify_all();
}

void RecordQueue::drain() {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return queue_.empty(); });
  if (error_) std::rethrow_exception(error_);
}

void RecordQueue::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return !queue_.empty() || closing_; });
    if (queue_.empty()) return;  // closing, and everything queued is committed
    const Item item = queue_.front();
    lock.unlock();
    std::exception_ptr failed;
    try {
      sink_(*item.result, item.case_id);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    queue_.pop_front();
    if (failed) {
      error_ = failed;
      queue_.clear();  // the store failed: writing later executions after a gap would hide it
    }
    changed_.notify_all();
  }
}

}  // namespace cprr

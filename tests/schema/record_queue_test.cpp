// RecordQueue: executions committed on a writer thread land in the store exactly as writing them
// in place does, in order, each in its own transaction; drain() and the destructor leave nothing
// queued; a failed write stops the queue and is rethrown. No timings are asserted: a fake sink
// that waits on a latch decides what is still queued.
#include "schema/record_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "schema/record_writer.h"
#include "schema/store.h"
#include "tests/schema/record_samples.h"

namespace cprr {
namespace {

using namespace cprr::samples;
using ::testing::HasSubstr;

// Every row of the per-execution tables, in key order, as text: what two stores must agree on.
std::vector<std::string> execution_rows(const std::string& path) {
  const Database db = Database::open(path, Database::Mode::read_only);
  std::vector<std::string> rows;
  for (const char* sql :
       {"SELECT * FROM execution ORDER BY id", "SELECT * FROM rank_result ORDER BY 1, 2",
        "SELECT * FROM capture ORDER BY 1, 2, 3, 4", "SELECT * FROM alloc_event ORDER BY 1, 2, 3",
        "SELECT * FROM op ORDER BY 1, 2, 3", "SELECT * FROM collective ORDER BY 1, 2, 3"}) {
    Statement st(db, sql);
    while (st.step()) {
      std::string row = sql;
      for (int c = 0; c < st.columns(); ++c) row += "|" + (st.is_null(c) ? "NULL" : st.blob(c));
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::vector<ExecutionResult> sample_executions() {
  return {execution(Mode::pool, 5, 1), execution(Mode::fresh, 6, 1), execution(Mode::pool, 5, 2),
          execution(Mode::pool, 5, 3)};
}

const RunMeta kMeta{
    BackendKind::cpu, {Mode::fresh, Mode::pool}, Placement::best_fit, "/bin/worker", {"cprecord"}};

TEST(RecordQueue, StoresEveryExecutionExactlyAsWritingInPlaceDoes) {
  const TempDb tmp;
  const std::vector<CaseInstance> plan = {instance(1, "a/first", {}, 2),
                                          instance(2, "a/second", {{"n", "4"}}, 2)};
  const std::vector<ExecutionResult> execs = sample_executions();
  {
    RecordWriter w(tmp.path("direct.db"), kMeta);
    const std::vector<int64_t> ids = w.add_cases(plan);
    for (std::size_t i = 0; i < execs.size(); ++i) w.write(execs[i], ids[i % 2]);
    w.finish(0);
  }
  {
    RecordWriter w(tmp.path("queued.db"), kMeta);
    const std::vector<int64_t> ids = w.add_cases(plan);
    {
      RecordQueue q(w, /*max_queued=*/2);  // fewer than the executions: submit() must wait
      for (std::size_t i = 0; i < execs.size(); ++i) q.submit(execs[i], ids[i % 2]);
      q.drain();
    }
    w.finish(0);
  }
  const std::vector<std::string> direct = execution_rows(tmp.path("direct.db"));
  EXPECT_GT(direct.size(), execs.size()) << "the samples have ranks, captures and logs";
  EXPECT_EQ(execution_rows(tmp.path("queued.db")), direct);
}

// A sink that records what it was given and, while `hold` is set, waits before returning: the
// executions behind it are then still queued.
struct HeldSink {
  std::mutex mu;
  std::condition_variable cv;
  bool hold = true;
  bool entered = false;
  std::vector<int64_t> written;

  RecordQueue::Sink sink() {
    return [this](const ExecutionResult&, int64_t case_id) {
      std::unique_lock lock(mu);
      entered = true;
      cv.notify_all();
      cv.wait(lock, [&] { return !hold; });
      written.push_back(case_id);
    };
  }
  void wait_entered() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  void release() {
    std::lock_guard lock(mu);
    hold = false;
    cv.notify_all();
  }
};

TEST(RecordQueue, DrainReturnsOnlyOnceEverythingSubmittedIsWrittenInOrder) {
  const std::vector<ExecutionResult> execs = sample_executions();
  HeldSink held;
  RecordQueue q(held.sink(), /*max_queued=*/8);
  for (std::size_t i = 0; i < execs.size(); ++i) q.submit(execs[i], static_cast<int64_t>(i));
  held.wait_entered();
  {
    std::lock_guard lock(held.mu);
    EXPECT_TRUE(held.written.empty()) << "the first write is still held";
  }
  held.release();
  q.drain();
  std::lock_guard lock(held.mu);
  EXPECT_EQ(held.written, (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(RecordQueue, DestroyingTheQueueWritesWhatIsStillQueued) {
  // cprecord's error paths leave the case loop without drain(): what ran must still be stored.
  const std::vector<ExecutionResult> execs = sample_executions();
  HeldSink held;
  {
    RecordQueue q(held.sink(), /*max_queued=*/8);
    for (std::size_t i = 0; i < execs.size(); ++i) q.submit(execs[i], static_cast<int64_t>(i));
    held.wait_entered();
    held.release();
  }
  EXPECT_EQ(held.written, (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(RecordQueue, AFailedWriteStopsTheQueueAndIsRethrownBySubmitAndDrain) {
  const std::vector<ExecutionResult> execs = sample_executions();
  std::vector<int64_t> written;
  RecordQueue q(
      [&](const ExecutionResult&, int64_t case_id) {
        if (case_id == 1) CPRR_THROW("disk full writing case {}", case_id);
        written.push_back(case_id);
      },
      /*max_queued=*/8);
  // The writer thread may fail on case 1 before cases 2 and 3 are queued: then the submit that
  // follows is what rethrows it, and drain does after it.
  const auto submit_all = [&] {
    for (int64_t id = 0; id < 4; ++id) q.submit(execs[id], id);
    q.drain();
  };
  EXPECT_THAT(submit_all, ::testing::ThrowsMessage<Error>(HasSubstr("disk full writing case 1")));
  EXPECT_EQ(written, std::vector<int64_t>{0}) << "nothing after the failure is written";
  EXPECT_THROW(q.submit(execs[0], 9), Error);
  EXPECT_THROW(q.drain(), Error) << "the store stays failed";
}

TEST(RecordQueue, ANoRoomQueueIsRefusedBeforeItsThreadStarts) {
  EXPECT_THROW(RecordQueue([](const ExecutionResult&, int64_t) {}, 0), Error);
}

TEST(RecordQueue, AFailedCommitThroughTheWriterLeavesTheExecutionsBeforeIt) {
  const TempDb tmp;
  const std::vector<ExecutionResult> execs = sample_executions();
  RecordWriter w(tmp.path(), kMeta);
  const int64_t id = w.add_cases({instance(1, "a/first", {}, 2)}).at(0);
  {
    RecordQueue q(w);
    q.submit(execs[0], id);
    q.submit(execs[1], id + 1000);  // no such case: the foreign key refuses the execution row
    q.submit(execs[2], id);
    EXPECT_THROW(q.drain(), Error);
  }
  const Database db = Database::open(tmp.path(), Database::Mode::read_only);
  Statement count(db, "SELECT COUNT(*) FROM execution");
  ASSERT_TRUE(count.step());
  EXPECT_EQ(count.int64(0), 1) << "the first execution, committed; the failed one rolled back";
}

}  // namespace
}  // namespace cprr

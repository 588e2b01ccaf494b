#include "runtime/cpu_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.h"

namespace cprr {
namespace {

using namespace std::chrono_literals;

/// Polls `cond` (a cross-thread observation with no event to wait on) for up to 5 s.
template <class F>
bool eventually(F cond) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);  // why: the poll of a wait with a deadline
  }
  return true;
}

/// A mutex-guarded log of what ran, for asserting order across threads.
class OrderLog {
 public:
  void add(std::string what) {
    std::lock_guard lock(mu_);
    entries_.push_back(std::move(what));
  }
  std::vector<std::string> entries() const {
    std::lock_guard lock(mu_);
    return entries_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> entries_;
};

TEST(CpuStream, FreshStreamHasNothingPending) {
  CpuStream s(3, "compute");
  EXPECT_EQ(s.id(), 3);
  EXPECT_EQ(s.name(), "compute");
  EXPECT_EQ(s.last_ticket(), 0u);
  EXPECT_EQ(s.done_ticket(), 0u);
  EXPECT_EQ(s.current_op(), "");
  s.wait_for(0);
  s.synchronize();
}

TEST(CpuStream, RunsManyOpsInFifoOrderWithSequentialTickets) {
  CpuStream s(0, "s");
  std::vector<int> seen;  // only the stream thread writes it until synchronize()
  constexpr int kOps = 2000;
  for (int i = 0; i < kOps; ++i) {
    const uint64_t ticket = s.enqueue("op", [&seen, i] { seen.push_back(i); });
    EXPECT_EQ(ticket, static_cast<uint64_t>(i + 1));
  }
  EXPECT_EQ(s.last_ticket(), static_cast<uint64_t>(kOps));
  s.synchronize();
  EXPECT_EQ(s.done_ticket(), static_cast<uint64_t>(kOps));
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kOps));
  for (int i = 0; i < kOps; ++i) ASSERT_EQ(seen[i], i) << "op " << i << " ran out of order";
}

TEST(CpuStream, ConcurrentEnqueuersGetUniqueTicketsAndKeepTheirOrder) {
  CpuStream s(0, "s");
  constexpr int kThreads = 4;
  constexpr int kPerThread = 300;
  std::vector<std::vector<int>> ran(kThreads);  // written only by the stream thread
  std::vector<std::vector<uint64_t>> tickets(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        tickets[t].push_back(s.enqueue("op", [&ran, t, i] { ran[t].push_back(i); }));
      }
    });
  }
  for (auto& th : threads) th.join();
  s.synchronize();
  std::vector<bool> used(kThreads * kPerThread + 1, false);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const uint64_t ticket = tickets[t][i];
      ASSERT_GE(ticket, 1u);
      ASSERT_LE(ticket, static_cast<uint64_t>(kThreads * kPerThread));
      ASSERT_FALSE(used[ticket]) << "ticket " << ticket << " handed out twice";
      used[ticket] = true;
      if (i > 0) {
        ASSERT_GT(ticket, tickets[t][i - 1]);
      }
      ASSERT_EQ(ran[t][i], i);
    }
  }
}

TEST(CpuStream, WaitForBlocksUntilThatTicketIsDone) {
  CpuStream s(0, "s");
  std::latch release(1);
  const uint64_t t = s.enqueue("blocked", [&] { release.wait(); });
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    s.wait_for(t);
    returned = true;
  });
  std::this_thread::sleep_for(30ms);  // why: a window for an early return to show in
  EXPECT_FALSE(returned) << "wait_for returned before the op finished";
  EXPECT_EQ(s.done_ticket(), 0u);
  release.count_down();
  waiter.join();
  EXPECT_TRUE(returned);
  EXPECT_EQ(s.done_ticket(), t);
}

TEST(CpuStream, WaitForATicketNeverHandedOutThrows) {
  CpuStream s(0, "s");
  EXPECT_THROW(s.wait_for(1), Error);
  s.enqueue("op", [] {});
  EXPECT_THROW(s.wait_for(2), Error);
  s.wait_for(1);
}

TEST(CpuStream, EventWaitOrdersSecondStreamAfterFirstStreamsSlowOp) {
  CpuStream s1(1, "producer");
  CpuStream s2(2, "consumer");
  OrderLog log;
  std::latch release(1);
  const uint64_t t = s1.enqueue("slow", [&] {
    release.wait();
    log.add("s1 slow");
  });
  const CpuEvent ev{&s1, t};
  s2.enqueue("wait", [ev] { ev.stream->wait_for(ev.ticket); });
  s2.enqueue("consume", [&] { log.add("s2 consume"); });

  // s2 must be parked in its wait op, not past it, while s1's op is held.
  ASSERT_TRUE(eventually([&] { return s2.current_op() == "wait"; }));
  std::this_thread::sleep_for(20ms);  // why: a window for a wrong release to show in
  EXPECT_EQ(s2.current_op(), "wait");
  EXPECT_EQ(s2.done_ticket(), 0u);
  EXPECT_TRUE(log.entries().empty());

  release.count_down();
  s2.synchronize();
  EXPECT_EQ(log.entries(), (std::vector<std::string>{"s1 slow", "s2 consume"}));
  s1.synchronize();
}

TEST(CpuStream, SynchronizeRethrowsFirstErrorAndSkipsLaterOps) {
  CpuStream s(0, "s");
  bool ran_before = false;
  bool ran_after = false;
  s.enqueue("ok", [&] { ran_before = true; });
  s.enqueue("bad", [] { throw Error("first failure"); });
  s.enqueue("worse", [] { throw std::runtime_error("second failure"); });
  const uint64_t last = s.enqueue("later", [&] { ran_after = true; });

  s.wait_for(last);  // skipped ops still complete their tickets: no deadlock
  EXPECT_EQ(s.done_ticket(), last);
  try {
    s.synchronize();
    FAIL() << "synchronize did not rethrow the op's error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "first failure");
  }
  EXPECT_TRUE(ran_before);
  EXPECT_FALSE(ran_after) << "an op after the failing one ran";

  // The error was taken: the stream is usable again.
  s.synchronize();
  bool ran_again = false;
  s.enqueue("again", [&] { ran_again = true; });
  s.synchronize();
  EXPECT_TRUE(ran_again);
}

TEST(CpuStream, CurrentOpNamesTheBlockedOpAndIsEmptyWhenIdle) {
  CpuStream s(0, "s");
  std::latch started(1);
  std::latch release(1);
  s.enqueue("kernel fill", [&] {
    started.count_down();
    release.wait();
  });
  started.wait();
  EXPECT_EQ(s.current_op(), "kernel fill");
  release.count_down();
  s.synchronize();
  EXPECT_EQ(s.current_op(), "");
}

TEST(CpuStream, CurrentOpIsSafeToPollFromAWatchdogThread) {
  CpuStream s(0, "s");
  std::atomic<bool> stop{false};
  std::atomic<int> bad_labels{0};
  std::thread watchdog([&] {
    while (!stop) {
      const std::string op = s.current_op();
      if (!op.empty() && op.rfind("op ", 0) != 0) ++bad_labels;
    }
  });
  for (int i = 0; i < 500; ++i) s.enqueue("op " + std::to_string(i), [] {});
  s.synchronize();
  stop = true;
  watchdog.join();
  EXPECT_EQ(bad_labels, 0);
}

TEST(CpuStream, DestructorRunsQueuedOps) {
  std::atomic<int> ran{0};
  {
    CpuStream s(0, "s");
    s.enqueue("slow", [&] {
      std::this_thread::sleep_for(20ms);  // why: the slow op itself
      ++ran;
    });
    for (int i = 0; i < 100; ++i) s.enqueue("op", [&] { ++ran; });
  }
  EXPECT_EQ(ran, 101);
}

}  // namespace
}  // namespace cprr

// cprr::Controller's own logic against scripted worlds (tests/recorder/engine/fake_world.h): pool
// reuse and replacement, fresh worlds, pool positions, deadlines, interruption, start-up failures.
// No process is spawned; engine_test.cpp runs the same controller against the real workers.
#include "recorder/engine/controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "runtime/fd.h"
#include "tests/recorder/engine/fake_world.h"

namespace cprr {
namespace {

using namespace fake_world;
using namespace rank_reports;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

CaseInstance instance(int world_size, double timeout_s = 0, Expect expect = Expect::pass) {
  CaseInstance i;
  i.id = 7;
  i.info.name = "test/case";
  i.info.options.timeout_s = timeout_s;
  i.info.options.expect = expect;
  i.world_size = world_size;
  i.seed = 42;
  return i;
}

class ControllerTest : public ::testing::Test {
 protected:
  // The controller reads the clock through ControllerConfig::now; it stands still here.
  ControllerConfig config() {
    ControllerConfig c;
    c.worker = "fake-worker";
    c.now = [this] { return now_; };
    c.retire_in_background = false;  // every call on this thread, in order (RetireTest: on)
    return c;
  }
  Controller controller(ControllerConfig c) {
    return Controller(std::move(c), std::make_unique<FakeWorlds>(script_));
  }
  Controller controller() { return controller(config()); }
  // The deadlines a controller with `cfg` gives cases declaring these timeouts, one run each.
  std::vector<Clock::time_point> deadlines(ControllerConfig cfg, std::vector<double> timeouts) {
    script_->deadlines.clear();
    Controller c = controller(std::move(cfg));
    for (double t : timeouts) c.run(instance(2, t), Mode::pool);
    return script_->deadlines;
  }

  std::shared_ptr<Script> script_ = std::make_shared<Script>();
  const Clock::time_point now_ = Clock::time_point(std::chrono::hours(1000));
};

// ---- pooling ----

TEST_F(ControllerTest, APooledWorldServesCasesInTurn) {
  Controller c = controller();
  for (uint64_t k = 1; k <= 3; ++k) {
    const ExecutionResult r = c.run(instance(2), Mode::pool, Placement::never_reuse);
    EXPECT_EQ(r.status, ExecStatus::pass) << r.summary;
    EXPECT_TRUE(r.as_expected);
    EXPECT_EQ(r.id, k);
    EXPECT_EQ(r.world_id, 1u);
    EXPECT_EQ(r.pool_position, k);
    EXPECT_EQ(r.startup_ms, k == 1 ? 5 : 0) << "only the first case pays for the start";
    ASSERT_EQ(r.ranks.size(), 2u);
    EXPECT_EQ(r.ranks[1].stderr_tail, "world 1 rank 1");
  }
  EXPECT_EQ(script_->made.size(), 1u);
  EXPECT_EQ(script_->count("kill 1"), 0);
  EXPECT_THAT(script_->collected, ElementsAre(1, 2, 3));
  const RunCase& sent = script_->started.back();
  EXPECT_EQ(sent.execution, 3u);
  EXPECT_EQ(sent.name, "test/case");
  EXPECT_EQ(sent.seed, 42u);
  EXPECT_EQ(sent.placement, Placement::never_reuse);
}

TEST_F(ControllerTest, EachWorldSizeHasItsOwnPool) {
  Controller c = controller();
  std::vector<std::pair<uint64_t, uint64_t>> got;  // (world, position)
  for (int size : {2, 4, 2, 4}) {
    const ExecutionResult r = c.run(instance(size), Mode::pool);
    got.emplace_back(r.world_id, r.pool_position);
    EXPECT_EQ(r.ranks.size(), static_cast<std::size_t>(size));
  }
  EXPECT_THAT(
      got, ElementsAre(std::pair{1u, 1u}, std::pair{2u, 1u}, std::pair{1u, 2u}, std::pair{2u, 2u}));
  ASSERT_EQ(script_->made.size(), 2u);
  EXPECT_EQ(script_->made[0].world_size, 2);
  EXPECT_EQ(script_->made[1].world_size, 4);
  EXPECT_EQ(script_->made[1].worker, "fake-worker");
}

// cprecord --jobs: job 2 of 3 numbers its worlds and executions 2, 5, 8, ... (never one of the
// other jobs'), and records where it ran with each execution.
TEST_F(ControllerTest, AJobsControllerTakesEveryStepthIdFromItsFirstAndRecordsItsDevices) {
  ControllerConfig cfg = config();
  cfg.first_id = 2;
  cfg.id_step = 3;
  cfg.devices = "cpus 2-3";
  Controller c = controller(cfg);
  std::vector<std::pair<uint64_t, uint64_t>> got;  // (execution, world)
  for (int size : {2, 4, 2}) {
    const ExecutionResult r = c.run(instance(size), Mode::pool);
    got.emplace_back(r.id, r.world_id);
    EXPECT_EQ(r.devices, "cpus 2-3");
  }
  const ExecutionResult fresh = c.run(instance(2), Mode::fresh);
  got.emplace_back(fresh.id, fresh.world_id);
  EXPECT_THAT(got, ElementsAre(std::pair{2u, 2u}, std::pair{5u, 5u}, std::pair{8u, 2u},
                               std::pair{11u, 8u}));
}

// A rank whose library's call into the transport raised (the case failed or not) leaves a
// world its next case could not trust: the world is killed, said so, and replaced.
TEST_F(ControllerTest, AWorldWhoseTransportARankDistrustsIsReplacedAfterTheCase) {
  Controller c = controller();
  c.run(instance(2), Mode::pool);
  RankReport distrusting = passed();
  distrusting.done->distrusted = "dist.send raised RuntimeError: writev: Bad address";
  script_->collects.push_back(rank0(distrusting));
  const ExecutionResult broken = c.run(instance(2), Mode::pool);
  EXPECT_EQ(broken.status, ExecStatus::pass) << broken.summary;
  EXPECT_THAT(broken.note, HasSubstr("rank 0: dist.send raised RuntimeError: writev: Bad "
                                     "address: the world is replaced"));
  EXPECT_EQ(script_->count("kill 1"), 1);
  const ExecutionResult next = c.run(instance(2), Mode::pool);
  EXPECT_EQ(next.world_id, 2u);
  EXPECT_EQ(next.note, "");
}

struct Fault {
  std::string name;
  RankReport rank0;
  ExecStatus status;
};

// The test name says which fault; gtest would print the struct's bytes.
void PrintTo(const Fault& f, std::ostream* os) { *os << f.name; }

class ControllerFault : public ControllerTest, public ::testing::WithParamInterface<Fault> {};

INSTANTIATE_TEST_SUITE_P(
    Faults, ControllerFault,
    ::testing::Values(Fault{"crash", killed_by(SIGSEGV), ExecStatus::crash},
                      Fault{"broken_channel", broken("garbage"), ExecStatus::crash},
                      Fault{"hang", silent(), ExecStatus::hang},
                      Fault{"error", errored("unknown case"), ExecStatus::error}),
    [](const auto& info) { return info.param.name; });

TEST_P(ControllerFault, ReplacesThePooledWorldAfterKillingIt) {
  Controller c = controller();
  c.run(instance(2), Mode::pool);
  script_->collects.push_back(rank0(GetParam().rank0));
  const ExecutionResult faulty = c.run(instance(2), Mode::pool);
  EXPECT_EQ(faulty.status, GetParam().status) << faulty.summary;
  EXPECT_FALSE(faulty.as_expected);
  EXPECT_EQ(faulty.pool_position, 2u);
  EXPECT_EQ(script_->count("kill 1"), 1);

  const ExecutionResult next = c.run(instance(2), Mode::pool);
  EXPECT_EQ(next.status, ExecStatus::pass);
  EXPECT_EQ(next.world_id, 2u);
  EXPECT_EQ(next.pool_position, 1u);
  EXPECT_EQ(next.startup_ms, 5);
  EXPECT_THAT(script_->calls, ::testing::IsSupersetOf({"destroy 1", "make 2"}));
}

TEST_F(ControllerTest, AFailedCaseKeepsThePooledWorld) {
  Controller c = controller();
  script_->collects.push_back(rank0(failed("x != 3")));
  const ExecutionResult failing = c.run(instance(2), Mode::pool);
  EXPECT_EQ(failing.status, ExecStatus::fail);
  EXPECT_EQ(failing.summary, "rank 0: x != 3");
  const ExecutionResult next = c.run(instance(2), Mode::pool);
  EXPECT_EQ(next.world_id, 1u);
  EXPECT_EQ(next.pool_position, 2u);
  EXPECT_EQ(script_->count("kill 1"), 0);
}

// Both ranks returned, but rank 1 took a message short (NCCL completes it): what rank 0 sent
// beyond it may still sit in the transport, so the pooled world is replaced; a dtype alone
// moves the same bytes and keeps it.
TEST_F(ControllerTest, CallsThatMovedOtherBytesReplaceThePooledWorldEvenWhenEveryRankPassed) {
  Controller c = controller();
  const auto with = [](std::vector<CollectiveRecord> log) {
    RankReport r = passed();
    r.done->capture.collectives = std::move(log);
    return r;
  };
  const CollectiveRecord send{0, "send", 0, DType::f32, 4096, -1, ReduceOp::sum, 0, 0, 1};
  CollectiveRecord short_recv{0, "recv", 0, DType::f32, 2048, -1, ReduceOp::sum, 0, 0, 0};
  script_->collects.push_back([&](uint64_t, int) {
    return std::vector<RankReport>{with({send}), with({short_recv})};
  });
  const ExecutionResult r = c.run(instance(2), Mode::pool);
  EXPECT_EQ(r.status, ExecStatus::pass);
  EXPECT_THAT(r.note, HasSubstr("message #0 from rank 0 to rank 1: rank 0 sends bytes 4096, rank 1 "
                                "receives bytes 2048): the world is replaced"));
  EXPECT_EQ(script_->count("kill 1"), 1);
  short_recv.bytes = 4096;
  short_recv.dtype = DType::i32;
  script_->collects.push_back([&](uint64_t, int) {
    return std::vector<RankReport>{with({send}), with({short_recv})};
  });
  const ExecutionResult same_bytes = c.run(instance(2), Mode::pool);
  EXPECT_THAT(same_bytes.note, Not(HasSubstr("replaced")));
  EXPECT_EQ(script_->count("kill 2"), 0);
}

TEST_F(ControllerTest, AHangAsksTheWatchdogsBeforeKillingAndNamesWhoNeverJoined) {
  Controller c = controller();
  script_->collects.push_back(every_rank(silent()));
  script_->watchdogs[0] = waiting("body", 1, "all_reduce", 0).watchdog.value();
  script_->watchdogs[1] = waiting("body", 0, "barrier", 0).watchdog.value();
  const ExecutionResult r = c.run(instance(2), Mode::pool);
  EXPECT_EQ(r.status, ExecStatus::hang);
  EXPECT_THAT(r.summary, HasSubstr("rank 1 never joined collective #1 (all_reduce)"));
  EXPECT_THAT(script_->calls, ElementsAre("make 1", "start 1", "collect 1", "query 1", "flight 1",
                                          "kill 1", "tails 1", "destroy 1"));
}

TEST_F(ControllerTest, ARankReleasedAfterAFailureIsDescribedFromItsFlightRecordToo) {
  Controller c = controller();
  // Rank 1 raised; rank 0 had entered all_reduce #1, which its watchdog had not counted yet.
  script_->collects.push_back([](uint64_t, int) {
    return std::vector<RankReport>{silent(), failed("ValueError: bad")};
  });
  script_->watchdogs[0] = waiting("body", 0, "all_reduce", 0).watchdog.value();
  script_->flight_records[0] = {CollectiveRecord{.seq = 0, .kind = "all_reduce"},
                                CollectiveRecord{.seq = 1, .kind = "all_reduce"}};
  const ExecutionResult r = c.run(instance(2), Mode::pool);
  EXPECT_EQ(r.status, ExecStatus::fail);
  EXPECT_THAT(r.note, HasSubstr("rank 0 was in body (waiting in collective #1 all_reduce) when "
                                "rank 1 failed"));
  EXPECT_EQ(script_->count("flight 1"), 1) << "read once, before the note";
}

TEST_F(ControllerTest, ACrashAfterRanksCalledACollectiveDifferentlySaysSo) {
  Controller c = controller();
  // Rank 0 waits in the all-reduce; rank 1 entered it with fewer bytes and aborted.
  script_->collects.push_back([](uint64_t, int) {
    return std::vector<RankReport>{silent(), killed_by(SIGABRT)};
  });
  script_->flight_records[0] = {CollectiveRecord{0, "all_reduce", 0, DType::f32, 4096, -1}};
  script_->flight_records[1] = {CollectiveRecord{0, "all_reduce", 0, DType::f32, 4000, -1}};
  const ExecutionResult r = c.run(instance(2), Mode::pool);
  EXPECT_EQ(r.status, ExecStatus::crash);
  EXPECT_THAT(r.summary, HasSubstr("rank 1 killed by signal 6 (SIGABRT)"));
  EXPECT_THAT(r.summary, HasSubstr("the ranks called a collective differently: collective #0 "
                                   "(all_reduce): rank 0 has bytes 4096, rank 1 has bytes 4000"));
  ASSERT_EQ(r.ranks.at(1).entered.size(), 1u) << "the flight record travels with the result";
  // Agreeing records: the crash alone.
  script_->collects.push_back([](uint64_t, int) {
    return std::vector<RankReport>{silent(), killed_by(SIGABRT)};
  });
  script_->flight_records[1] = script_->flight_records[0];
  EXPECT_THAT(c.run(instance(2), Mode::pool).summary, Not(HasSubstr("collective")));
}

TEST_F(ControllerTest, AnIdleFaultReplacesTheWorldBeforeTheNextCaseAndTheNoteSaysSo) {
  Controller c = controller();
  c.run(instance(2), Mode::pool);
  script_->idle_fault = "rank 1 exited with code 3 between cases";
  const ExecutionResult r = c.run(instance(2), Mode::pool);
  EXPECT_EQ(r.status, ExecStatus::pass) << "the death between cases is not this case's";
  EXPECT_EQ(r.world_id, 2u);
  EXPECT_EQ(r.pool_position, 1u);
  EXPECT_EQ(r.note,
            "pooled world 1 replaced before this case: rank 1 exited with code 3 between cases");
  EXPECT_EQ(c.run(instance(2), Mode::pool).note, "");
}

// ---- fresh worlds ----

TEST_F(ControllerTest, FreshModeMakesAWorldPerCaseAndEndsItAfterwards) {
  Controller c = controller();
  for (uint64_t k = 1; k <= 2; ++k) {
    const ExecutionResult r = c.run(instance(2), Mode::fresh);
    EXPECT_EQ(r.world_id, k);
    EXPECT_EQ(r.pool_position, 1u);
    EXPECT_EQ(r.startup_ms, 5);
  }
  EXPECT_THAT(script_->calls,
              ElementsAre("make 1", "start 1", "collect 1", "tails 1", "destroy 1", "make 2",
                          "start 2", "collect 2", "tails 2", "destroy 2"));
  EXPECT_EQ(c.run(instance(2), Mode::pool).world_id, 3u) << "a fresh world never joins the pool";
}

// ---- fresh worlds shut down in the background ----

class RetireTest : public ControllerTest {
 protected:
  ControllerConfig retiring() {
    ControllerConfig c = config();
    c.retire_in_background = true;
    return c;
  }
};

TEST_F(RetireTest, AHealthyFreshWorldEndsAfterItsResultIsReturned) {
  std::promise<void> gate;
  script_->destroy_gate = gate.get_future().share();
  Controller c = controller(retiring());
  const ExecutionResult r = c.run(instance(2), Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::pass);
  EXPECT_EQ(script_->count("destroy 1"), 0) << "run() waited for the fresh world's shutdown";
  gate.set_value();
  c.close_pools();
  EXPECT_EQ(script_->count("destroy 1"), 1) << "close_pools() returned before the world ended";
  EXPECT_EQ(c.run(instance(2), Mode::fresh).world_id, 2u);
}

TEST_F(RetireTest, AtMostOneWorldWaitsToEnd) {
  std::promise<void> gate;
  script_->destroy_gate = gate.get_future().share();
  Controller c = controller(retiring());
  c.run(instance(2), Mode::fresh);  // world 1: the retiring thread takes it and waits at the gate
  c.run(instance(2), Mode::fresh);  // world 2: waits its turn
  std::thread opener([&] {
    // The third handover must block until world 1 is gone: nothing can end before the gate.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // why: a window to end early in
    gate.set_value();
  });
  c.run(instance(2), Mode::fresh);
  EXPECT_EQ(script_->count("destroy 1"), 1) << "a third world was handed over while two waited";
  opener.join();
  c.close_pools();
  EXPECT_EQ(script_->count("destroy 3"), 1);
}

TEST_F(RetireTest, AFreshWorldThatCrashedOrWasStoppedEndsBeforeRunReturns) {
  std::promise<void> gate;
  gate.set_value();
  script_->destroy_gate = gate.get_future().share();
  Controller c = controller(retiring());
  script_->collects.push_back(rank0(killed_by(SIGSEGV)));
  EXPECT_EQ(c.run(instance(2), Mode::fresh).status, ExecStatus::crash);
  EXPECT_EQ(script_->count("destroy 1"), 1) << "a crashed world outlived its case";
  script_->stop = true;  // fired after every rank passed: the case stands, the run is stopping
  EXPECT_EQ(c.run(instance(2), Mode::fresh).status, ExecStatus::pass);
  EXPECT_EQ(script_->count("destroy 2"), 1) << "a world outlived its case after a stop";
}

// ---- standby worlds (foresee) ----

class StandbyTest : public ControllerTest {
 protected:
  // Deferred: a standby world is made on this thread when its case takes it, so the fake's
  // record stays single-threaded; the ids and the matching are what is under test here
  // (engine_faults_test.cpp runs real standby worlds on the starter threads).
  ControllerConfig standby_config(int n) {
    ControllerConfig c = config();
    c.run.standby = n;
    c.standby_policy = std::launch::deferred;
    return c;
  }
};

TEST_F(StandbyTest, AFreshCaseTakesTheWorldStandingByForItsSize) {
  Controller c = controller(standby_config(2));
  c.foresee({2, 4}, true);  // world 1 (size 2) for the next run, world 2 (size 4) after it
  const ExecutionResult two = c.run(instance(2), Mode::fresh);
  EXPECT_EQ(two.world_id, 1u);
  EXPECT_EQ(two.startup_ms, 5);
  EXPECT_EQ(two.pool_position, 1u);
  c.foresee({4, 4}, true);  // world 2 stays, for the next run; world 3 (size 4) joins it
  const ExecutionResult four = c.run(instance(4), Mode::fresh);
  EXPECT_EQ(four.world_id, 2u);
  EXPECT_EQ(c.run(instance(4), Mode::fresh).world_id, 3u);
  // Every world ran exactly its own case and was ended after it: none ran anything before.
  EXPECT_THAT(script_->calls,
              ElementsAre("make 1", "start 1", "collect 1", "tails 1", "destroy 1", "make 2",
                          "start 2", "collect 2", "tails 2", "destroy 2", "make 3", "start 3",
                          "collect 3", "tails 3", "destroy 3"));
}

TEST_F(StandbyTest, TheNextRunsOwnWorldIsNotOneOfTheStandbyOnes) {
  Controller c = controller(standby_config(1));
  c.foresee({2, 4}, true);  // world 1 for the next run, and one standing by: world 2 (size 4)
  EXPECT_EQ(c.run(instance(2), Mode::fresh).world_id, 1u);
  EXPECT_EQ(c.run(instance(2), Mode::pool).world_id, 3u) << "world 2 was never foreseen";
  EXPECT_EQ(c.run(instance(4), Mode::fresh).world_id, 2u);
}

TEST_F(StandbyTest, OnlyTheFirstNAreKeptAndNoLongerNeededOnesAreDropped) {
  Controller c = controller(standby_config(1));
  c.foresee({2, 2, 2}, false);  // the next run is pooled: one stands by, world 1
  c.foresee({4}, false);        // world 1 is not needed any more; world 2 (size 4) stands by
  const ExecutionResult r = c.run(instance(2), Mode::fresh);
  EXPECT_EQ(r.world_id, 3u) << "nothing stood by for size 2: made now";
  EXPECT_EQ(c.run(instance(4), Mode::fresh).world_id, 2u);
  EXPECT_EQ(script_->count("make 1"), 0) << "a dropped deferred start never ran";
}

TEST_F(StandbyTest, PoolModeNeverTakesAStandbyWorldAndZeroTurnsItOff) {
  Controller c = controller(standby_config(1));
  c.foresee({2}, false);
  EXPECT_EQ(c.run(instance(2), Mode::pool).world_id, 2u);
  EXPECT_EQ(c.run(instance(2), Mode::fresh).world_id, 1u);

  Controller off = controller(standby_config(0));
  off.foresee({2, 2}, true);
  EXPECT_EQ(off.run(instance(2), Mode::fresh).world_id, 1u);
  EXPECT_EQ(off.run(instance(2), Mode::fresh).world_id, 2u);
}

TEST_F(StandbyTest, AStandbyWorldThatCannotStartIsItsCasesError) {
  Controller c = controller(standby_config(1));
  c.foresee({2}, true);
  script_->start_failure = "world 1 (size 2): rank 0 failed to start: it closed its channel";
  const ExecutionResult r = c.run(instance(2), Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::error);
  EXPECT_EQ(r.summary, "world 1 (size 2): rank 0 failed to start: it closed its channel");
  EXPECT_EQ(c.run(instance(2), Mode::fresh).status, ExecStatus::pass);
}

// ---- start-up failures ----

TEST_F(ControllerTest, AWorldThatCannotStartIsAnErrorWithoutAWorld) {
  Controller c = controller();
  script_->start_failure = "world 1 (size 2): rank 1 failed to start: no hello within 60000 ms";
  const ExecutionResult r = c.run(instance(2), Mode::pool);
  EXPECT_EQ(r.status, ExecStatus::error);
  EXPECT_EQ(r.summary, "world 1 (size 2): rank 1 failed to start: no hello within 60000 ms");
  EXPECT_EQ(r.world_id, 0u);
  EXPECT_EQ(r.pool_position, 0u);
  EXPECT_FALSE(r.interrupted);
  EXPECT_TRUE(r.ranks.empty());

  const ExecutionResult next = c.run(instance(2), Mode::pool);
  EXPECT_EQ(next.status, ExecStatus::pass);
  EXPECT_EQ(next.world_id, 2u);
  EXPECT_EQ(next.pool_position, 1u);
}

TEST_F(ControllerTest, AStopDuringStartUpIsAnInterruption) {
  Controller c = controller();
  script_->interrupt_start = true;
  const ExecutionResult r = c.run(instance(2), Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::error);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.world_id, 0u);
  EXPECT_THAT(r.summary, HasSubstr("interrupted while world 1 was starting"));
}

// ---- deadlines ----

TEST_F(ControllerTest, TheDeadlineIsNowPlusTheCasesTimeoutOrTheDefault) {
  ControllerConfig cfg = config();
  cfg.default_timeout_s = 60;
  EXPECT_THAT(deadlines(cfg, {7, 0, 0.25}),
              ElementsAre(now_ + seconds(7), now_ + seconds(60), now_ + milliseconds(250)));
}

TEST_F(ControllerTest, TheTimeoutOverrideWinsOverTheCasesOwn) {
  ControllerConfig cfg = config();
  cfg.run.timeout_override_s = 3;
  EXPECT_THAT(deadlines(cfg, {7, 0}), ElementsAre(now_ + seconds(3), now_ + seconds(3)));
}

TEST_F(ControllerTest, AnAbsurdTimeoutSaturatesAtTheMaximum) {
  const auto max = now_ + seconds(static_cast<int64_t>(kMaxTimeoutS));
  EXPECT_THAT(deadlines(config(), {1e300, INFINITY}), ElementsAre(max, max));
  ControllerConfig cfg = config();
  cfg.run.timeout_override_s = 1e18;
  EXPECT_THAT(deadlines(cfg, {7}), ElementsAre(max));
}

// ---- stopping ----

TEST_F(ControllerTest, AStopBeforeTheCaseStartsNoWorld) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd read(fds[0]), write(fds[1]);
  ASSERT_EQ(::write(write.get(), "x", 1), 1);
  ControllerConfig cfg = config();
  cfg.stop_fd = read.get();
  Controller c = controller(cfg);
  for (int k = 0; k < 2; ++k) {
    const ExecutionResult r = c.run(instance(2), Mode::pool);
    EXPECT_EQ(r.status, ExecStatus::error);
    EXPECT_TRUE(r.interrupted);
    EXPECT_EQ(r.summary, "interrupted before it started");
    EXPECT_EQ(r.world_id, 0u);
  }
  EXPECT_TRUE(script_->made.empty());
  EXPECT_TRUE(script_->calls.empty());
}

TEST_F(ControllerTest, AStopWhileRanksRunInterruptsWithoutAQueryAndEndsThePooledWorld) {
  Controller c = controller();
  script_->stop = true;
  script_->collects.push_back(rank0(silent()));
  const ExecutionResult r = c.run(instance(2), Mode::pool);
  EXPECT_EQ(r.status, ExecStatus::error);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.summary, "interrupted while rank 0 was still running the case");
  EXPECT_THAT(script_->calls,
              ElementsAre("make 1", "start 1", "collect 1", "kill 1", "tails 1", "destroy 1"));
  script_->stop = false;
  EXPECT_EQ(c.run(instance(2), Mode::pool).world_id, 2u);
}

// ---- expectations ----

TEST_F(ControllerTest, AnExpectedCrashIsAsExpected) {
  Controller c = controller();
  script_->collects.push_back(rank0(killed_by(SIGABRT)));
  const ExecutionResult r = c.run(instance(2, 0, Expect::crash), Mode::pool);
  EXPECT_EQ(r.status, ExecStatus::crash);
  EXPECT_EQ(r.summary, "rank 0 killed by signal 6 (SIGABRT)");
  EXPECT_TRUE(r.as_expected);
}

}  // namespace
}  // namespace cprr

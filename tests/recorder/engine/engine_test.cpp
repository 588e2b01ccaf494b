// The execution engine against the real worker binaries: cprr::Controller running case instances
// in pooled and fresh worlds of cpworker (the corpus) and cprr_fixture_worker (test fixtures).
// Timing assertions are loose on purpose: the machine is small and shared.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "analysis/race_check.h"
#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "runtime/error.h"
#include "tests/recorder/engine/engine_support.h"

namespace cprr {
namespace {

using namespace engine_test;
using ::testing::HasSubstr;
using ::testing::Not;

// Every rank's output hashes, in rank order then output order.
std::vector<std::vector<uint64_t>> output_hashes(const ExecutionResult& r) {
  std::vector<std::vector<uint64_t>> out;
  for (const RankReport& rep : r.ranks) {
    std::vector<uint64_t> h;
    if (rep.done) {
      for (const Capture& c : rep.done->capture.outputs) h.push_back(c.digest.whole);
    }
    out.push_back(std::move(h));
  }
  return out;
}

int32_t raw_i32(const Capture& c) {
  int32_t v = 0;
  EXPECT_EQ(c.raw.size(), sizeof v) << c.name;
  if (c.raw.size() == sizeof v) std::memcpy(&v, c.raw.data(), sizeof v);
  return v;
}

INSTANTIATE_TEST_SUITE_P(W, EngineByWorldSize, ::testing::Values(2, 4),
                         [](const auto& info) { return "W" + std::to_string(info.param); });

// ---- pooling ----

TEST_P(EngineByWorldSize, OnePooledWorldServesManyCases) {
  Controller c(config(kWorker));
  const CaseInstance noop = inst(kWorker, at("healthy/noop"));
  const CaseInstance reduce = inst(kWorker, at("healthy/all_reduce{count=1000,dtype=f32}"));
  uint64_t world = 0;
  std::set<uint64_t> ids;
  for (int k = 1; k <= 20; ++k) {
    const ExecutionResult r = c.run(k % 2 ? noop : reduce, Mode::pool);
    expect_pass(r);
    ASSERT_EQ(r.ranks.size(), static_cast<std::size_t>(w()));
    if (k == 1) {
      world = r.world_id;
      EXPECT_NE(world, 0u);
      EXPECT_GT(r.startup_ms, 0);  // why: a floor of 0: the world's start was timed
    } else {
      EXPECT_EQ(r.world_id, world) << "execution " << k << " got a new world";
      EXPECT_EQ(r.startup_ms, 0) << "execution " << k;
    }
    EXPECT_EQ(r.pool_position, static_cast<uint64_t>(k));
    EXPECT_EQ(r.mode, Mode::pool);
    EXPECT_TRUE(ids.insert(r.id).second) << "execution id " << r.id << " reused";
    if (!(k % 2)) {
      for (const RankReport& rep : r.ranks) ASSERT_EQ(rep.done->capture.outputs.size(), 1u);
      EXPECT_EQ(r.ranks[0].done->capture.collectives.size(), 1u);
    }
  }
}

TEST(Engine, PoolsAreKeptPerWorldSize) {
  Controller c(config(kWorker));
  const ExecutionResult a2 = c.run(inst(kWorker, "healthy/noop@2"), Mode::pool);
  const ExecutionResult a4 = c.run(inst(kWorker, "healthy/noop@4"), Mode::pool);
  const ExecutionResult b2 = c.run(inst(kWorker, "healthy/noop@2"), Mode::pool);
  const ExecutionResult b4 = c.run(inst(kWorker, "healthy/noop@4"), Mode::pool);
  for (const auto* r : {&a2, &a4, &b2, &b4}) expect_pass(*r);
  EXPECT_NE(a2.world_id, a4.world_id);
  EXPECT_EQ(b2.world_id, a2.world_id);
  EXPECT_EQ(b4.world_id, a4.world_id);
  EXPECT_EQ(b2.pool_position, 2u);
  EXPECT_EQ(b4.pool_position, 2u);
  EXPECT_EQ(b4.ranks.size(), 4u);
}

TEST(Engine, FreshModeStartsANewWorldForEveryExecution) {
  Controller c(config(kWorker));
  const CaseInstance noop = inst(kWorker, "healthy/noop@2");
  const ExecutionResult pooled = c.run(noop, Mode::pool);
  std::set<uint64_t> worlds{pooled.world_id};
  for (int k = 0; k < 4; ++k) {
    const ExecutionResult r = c.run(noop, Mode::fresh);
    expect_pass(r);
    EXPECT_EQ(r.mode, Mode::fresh);
    EXPECT_TRUE(worlds.insert(r.world_id).second) << "fresh execution reused world " << r.world_id;
    EXPECT_EQ(r.pool_position, 1u);
    EXPECT_GT(r.startup_ms, 0);  // why: a floor of 0: the world's start was timed
  }
  // Fresh executions neither replace nor disturb the pooled world.
  EXPECT_TRUE(c.run(noop, Mode::pool).startup_phases.empty()) << "a reused world did not start";
  const ExecutionResult again = c.run(noop, Mode::pool);
  expect_pass(again);
  EXPECT_EQ(again.world_id, pooled.world_id);
  EXPECT_EQ(again.pool_position, 3u);
}

TEST(Engine, AWorldsStartIsBrokenDownIntoTheRanksStepsAddingUpToIt) {
  Controller c(config(kWorker));
  const ExecutionResult r = c.run(inst(kWorker, "healthy/noop@2"), Mode::fresh);
  expect_pass(r);
  std::vector<std::string> names;
  for (const StartupPhase& p : r.startup_phases) names.push_back(p.name);
  // The controller's steps around the rank's own (worker.cpp) and the cpu backend's.
  EXPECT_THAT(names,
              ::testing::ElementsAre("spawn ranks", "exec and load", "rank set-up", "arenas",
                                     "gloo communicator", "peer windows", "messages and waiting"));
  EXPECT_NEAR(total_ms(r.startup_phases), r.startup_ms, 0.05 * r.startup_ms + 0.5);
}

// ---- a user's own work (Context::native) ----

TEST(Engine, NativeOpsOnTwoStreamsRaceWithoutAnEventAndNotWithOne) {
  Controller c(config(kFixture));
  const ExecutionResult racy = c.run(inst(kFixture, "test/native_ops{ordered=0}@2"), Mode::fresh);
  expect_pass(racy);
  std::vector<std::string> notes;
  const std::optional<RaceFinding> race = find_race({&racy}, &notes);
  ASSERT_TRUE(race.has_value());
  EXPECT_EQ(race->race.first.kind, "native");
  EXPECT_EQ(race->race.first.name, "my_fill");
  EXPECT_EQ(race->race.second.name, "my_use");
  EXPECT_THAT(race->race.fix, HasSubstr("must wait for an event recorded after op"));
  EXPECT_TRUE(notes.empty()) << notes.front();

  const ExecutionResult ordered =
      c.run(inst(kFixture, "test/native_ops{ordered=1}@2"), Mode::fresh);
  expect_pass(ordered);
  EXPECT_FALSE(find_race({&ordered}).has_value());
}

TEST(Engine, ANativeHandleTakenOutsideNativeIsNotedAsUnchecked) {
  Controller c(config(kFixture));
  const ExecutionResult r = c.run(inst(kFixture, "test/native_handle@2"), Mode::pool);
  expect_pass(r);
  std::vector<std::string> notes;
  EXPECT_FALSE(find_race({&r}, &notes).has_value());
  ASSERT_EQ(notes.size(), 2u) << "one per rank";
  EXPECT_THAT(notes[0], HasSubstr("rank 0 took native_stream(stream 0) outside Context::native()"));
}

TEST(Engine, ADescriptorALibraryOpenedDuringACaseIsNotInheritedByALaterExec) {
  Controller c(config(kFixture));
  for (const char* w : {"1", "2"}) {
    SCOPED_TRACE(w);
    expect_pass(c.run(inst(kFixture, fmt::format("test/lazy_descriptor@{}", w)), Mode::pool));
    expect_pass(
        c.run(inst(kFixture, fmt::format("test/inheritable_descriptors{{all_reduce=0}}@{}", w)),
              Mode::pool));
  }
}

// ---- per-case results ----

TEST(Engine, FailingExpectationIsAFailAndKeepsTheWorld) {
  Controller c(config(kFixture));
  const ExecutionResult r = c.run(inst(kFixture, "test/fail_expect@2"), Mode::pool);
  EXPECT_EQ(r.status, ExecStatus::fail) << r.summary;
  EXPECT_FALSE(r.as_expected);
  EXPECT_THAT(r.summary, HasSubstr("rank 1:"));
  EXPECT_THAT(r.summary, HasSubstr("rank 1 was told to fail"));
  expect_all_done_for_self(r);
  EXPECT_EQ(r.ranks[0].done->outcome, RankOutcome::ok);
  EXPECT_EQ(r.ranks[1].done->outcome, RankOutcome::fail);
  EXPECT_THAT(r.ranks[1].done->error, HasSubstr("expectation failed"));

  const ExecutionResult expected = c.run(inst(kFixture, "test/fail_as_expected@2"), Mode::pool);
  EXPECT_EQ(expected.status, ExecStatus::fail);
  EXPECT_TRUE(expected.as_expected);
  // A body failure is the case's fault, not the world's: the world stays.
  const ExecutionResult next = c.run(inst(kFixture, "test/ok@2"), Mode::pool);
  expect_pass(next);
  EXPECT_EQ(next.world_id, r.world_id);
  EXPECT_EQ(next.pool_position, 3u);
}

TEST(Engine, EnvironmentAndResetHooksIsolatePooledCases) {
  Controller c(config(kFixture));
  std::vector<ExecutionResult> rs;
  for (const char* label : {"test/env_leak@2", "test/env_check@2", "test/reset_hook@2",
                            "test/reset_hook@2", "test/env_check@2"}) {
    rs.push_back(c.run(inst(kFixture, label), Mode::pool));
  }
  for (std::size_t k = 0; k < rs.size(); ++k) {
    expect_pass(rs[k]);
    EXPECT_EQ(rs[k].world_id, rs[0].world_id) << "env/reset cases must share one process";
    EXPECT_EQ(rs[k].pool_position, k + 1);
  }
  // Globals no hook resets survive between pooled cases (same process): 1 then 2 ...
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(rs[2].ranks[r].done->capture.outputs.size(), 1u);
    EXPECT_EQ(raw_i32(rs[2].ranks[r].done->capture.outputs[0]), 1);
    EXPECT_EQ(raw_i32(rs[3].ranks[r].done->capture.outputs[0]), 2);
  }
  // ... and start over in a fresh process.
  const ExecutionResult fresh = c.run(inst(kFixture, "test/reset_hook@2"), Mode::fresh);
  expect_pass(fresh);
  EXPECT_EQ(raw_i32(fresh.ranks[0].done->capture.outputs.at(0)), 1);
}

// ---- output handling ----

TEST_P(EngineByWorldSize, BannerFloodLeavesResultsIntact) {
  Controller c(config(kWorker));
  const CaseInstance flood = inst(kWorker, at("healthy/banner_flood{mib=100}"));
  const ExecutionResult p1 = c.run(flood, Mode::pool);
  const ExecutionResult p2 = c.run(flood, Mode::pool);
  const ExecutionResult noop = c.run(inst(kWorker, at("healthy/noop")), Mode::pool);
  const ExecutionResult f1 = c.run(flood, Mode::fresh);
  for (const auto* r : {&p1, &p2, &noop, &f1}) expect_pass(*r);
  EXPECT_EQ(p2.world_id, p1.world_id);
  EXPECT_EQ(noop.world_id, p1.world_id);
  EXPECT_EQ(noop.pool_position, 3u);

  const auto hashes = output_hashes(p1);
  for (const auto& h : hashes) ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(output_hashes(p2), hashes) << "pool repeat differs";
  EXPECT_EQ(output_hashes(f1), hashes) << "pool vs fresh differs";
  // All ranks reduce to the same sum.
  for (const auto& h : hashes) EXPECT_EQ(h, hashes[0]);

  for (const auto* r : {&p1, &p2, &f1}) {
    for (const RankReport& rep : r->ranks) {
      EXPECT_THAT(rep.stdout_tail,
                  HasSubstr("NCCL version 2.28.9+cuda13.0 (banner flood fixture)"));
      EXPECT_THAT(rep.stderr_tail, HasSubstr("(banner flood fixture)"));
      EXPECT_LE(rep.stdout_tail.size(), 16 * 1024 + 3);  // a tail, not 50 MiB
    }
  }
  // The next case in the same processes gets none of the flood.
  for (const RankReport& rep : noop.ranks) {
    EXPECT_THAT(rep.stdout_tail, Not(HasSubstr("NCCL version")));
    EXPECT_THAT(rep.stderr_tail, Not(HasSubstr("NCCL version")));
  }
}

TEST(Engine, ResultsAreAttributedToTheirExecution) {
  Controller c(config(kWorker));
  // Interleave faults and healthy cases; every healthy execution must carry its own id on every
  // rank (a stale CaseDone from a killed world would show up as a wrong id or a protocol error).
  const std::vector<std::string> labels = {"healthy/noop@2",      "bug/segfault_rank@2",
                                           "healthy/broadcast@2", "healthy/all_gather{count=1}@2",
                                           "bug/segfault_rank@2", "healthy/noop@2"};
  uint64_t last_id = 0;
  for (const std::string& label : labels) {
    const ExecutionResult r = c.run(inst(kWorker, label), Mode::pool);
    EXPECT_EQ(r.id, last_id + 1);
    last_id = r.id;
    EXPECT_EQ(r.label, label);
    EXPECT_TRUE(r.as_expected) << label << ": " << r.summary;
    if (label.starts_with("healthy/")) expect_pass(r);
  }
}

TEST(Engine, CpRingIsDeterministicAcrossFreshAndPooledWorlds) {
  Controller c(config(kWorker));
  const CaseInstance ring = inst(kWorker, "healthy/cp_ring{block=1024}@4");
  // Warm the pool with another case first, so the pooled run reuses arenas and streams.
  expect_pass(c.run(inst(kWorker, "healthy/two_stream_pipeline{n=4096}@4"), Mode::pool));
  const ExecutionResult fresh1 = c.run(ring, Mode::fresh);
  const ExecutionResult fresh2 = c.run(ring, Mode::fresh);
  const ExecutionResult pooled = c.run(ring, Mode::pool);
  for (const auto* r : {&fresh1, &fresh2, &pooled}) expect_pass(*r);
  EXPECT_EQ(pooled.pool_position, 2u);
  const auto h = output_hashes(fresh1);
  ASSERT_EQ(h.size(), 4u);
  for (const auto& rank : h) EXPECT_EQ(rank.size(), 2u);  // acc, max_logit
  EXPECT_EQ(output_hashes(fresh2), h);
  EXPECT_EQ(output_hashes(pooled), h);
  // Ranks hold different data, so equality above is not trivially true.
  EXPECT_NE(h[0], h[1]);
  // Probes (one per ring step) agree too.
  for (int r = 0; r < 4; ++r) {
    const auto& a = fresh1.ranks[r].done->capture.probes;
    const auto& b = pooled.ranks[r].done->capture.probes;
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(b.size(), a.size());
    for (std::size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k].digest, b[k].digest) << a[k].name;
  }
}

// Real cpu worlds record their transport and no GPU map, fresh and pooled alike.
TEST(Engine, ACpuWorldRecordsGlooAndNoGpus) {
  Controller c(engine_test::config(engine_test::kWorker));
  for (Mode mode : {Mode::fresh, Mode::pool}) {
    const ExecutionResult r =
        c.run(engine_test::inst(engine_test::kWorker, "healthy/noop@2"), mode);
    engine_test::expect_pass(r);
    EXPECT_EQ(r.collectives, "gloo");
    EXPECT_EQ(r.rank_gpus, "");
  }
}

// --collectives nccl on the cpu backend is refused at the start of the world, naming the option.
TEST(Engine, ACpuWorldAskedForNcclDoesNotStart) {
  ControllerConfig cc = engine_test::config(engine_test::kWorker);
  cc.run.collectives = CollectivesRequest::nccl;
  Controller c(cc);
  const ExecutionResult r =
      c.run(engine_test::inst(engine_test::kWorker, "healthy/noop@2"), Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::error);
  EXPECT_NE(r.summary.find("--collectives nccl needs the cuda backend"), std::string::npos)
      << r.summary;
}

}  // namespace
}  // namespace cprr

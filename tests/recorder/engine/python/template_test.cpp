// Python ranks forked from a template process (recorder/launch/rank_spawner.h): a world so
// started behaves as one whose ranks were posix_spawn'ed (same outputs, same start-up state of
// each rank), its crashes and hangs are reported as they were, what its ranks leave behind is
// reaped, a template that dies or refuses fails that start only, and nothing outlives the
// controller.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "recorder/launch/process.h"
#include "runtime/startup_phases.h"
#include "tests/recorder/engine/python/template_support.h"

namespace cprr {
namespace {

using namespace template_test;
using ::testing::HasSubstr;

// Each output of each rank by name, as "rank/name" -> whole-buffer hash.
std::map<std::string, uint64_t> output_hashes(const ExecutionResult& r) {
  std::map<std::string, uint64_t> out;
  for (std::size_t k = 0; k < r.ranks.size(); ++k) {
    if (!r.ranks[k].done) continue;
    for (const Capture& c : r.ranks[k].done->capture.outputs) {
      out[std::to_string(k) + "/" + c.name] = c.digest.whole;
    }
  }
  return out;
}

std::string stdout_of(const ExecutionResult& r) {
  std::string out;
  for (std::size_t k = 0; k < r.ranks.size(); ++k) {
    out += "-- rank " + std::to_string(k) + ":\n" + r.ranks[k].stdout_tail;
  }
  return out;
}

TEST(TemplateWorld, RunsCasesWithTheOutputsAndStartOfASpawnedWorld) {
  CaseDir dir("cases");
  std::map<bool, std::map<std::string, uint64_t>> hashes;
  std::map<bool, std::string> printed;
  for (const bool fork : {true, false}) {
    SCOPED_TRACE(fork ? "forked from the template" : "posix_spawn'ed");
    const ControllerConfig cc = python_config(dir.path(), fork);
    {
      Controller c(cc);
      for (const char* label : {"tmpl/all_reduce@2", "tmpl/start_state@2"}) {
        const ExecutionResult r = c.run(instance(cc, label), Mode::fresh);
        ASSERT_EQ(r.status, ExecStatus::pass) << label << ": " << r.summary;
        for (const auto& [name, hash] : output_hashes(r)) hashes[fork][label + (":" + name)] = hash;
        printed[fork] += stdout_of(r);
        // The start's steps still add up to it, the template's request in "spawn ranks".
        EXPECT_NEAR(total_ms(r.startup_phases), r.startup_ms, 0.05 * r.startup_ms + 0.5);
      }
      EXPECT_EQ(template_children().size(), fork ? 1u : 0u);
    }
    EXPECT_TRUE(template_children().empty()) << "the template outlived its controller";
  }
  ASSERT_EQ(hashes[true].size(), 2u * (1 + 7)) << printed[true];  // 2 ranks: 1 + 7 outputs each
  EXPECT_EQ(hashes[true], hashes[false]) << "forked:\n"
                                         << printed[true] << "\nspawned:\n"
                                         << printed[false];
}

TEST(TemplateWorld, PooledAndStandbyWorldsForkFromOneTemplate) {
  CaseDir dir("cases");
  ControllerConfig cc = python_config(dir.path(), true);
  cc.run.standby = 2;
  Controller c(cc);
  const CaseInstance inst = instance(cc, "tmpl/all_reduce@2");
  const std::vector<int> sizes(4, 2);
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    // As cprecord's run_plan() does: this run's world and the next standby ones start now.
    c.foresee(std::vector<int>(sizes.begin() + static_cast<long>(k), sizes.end()), true);
    const ExecutionResult r = c.run(inst, Mode::fresh);
    EXPECT_EQ(r.status, ExecStatus::pass) << r.summary;
  }
  // Every fresh world is gone (a forked rank has the template's command line too).
  EXPECT_EQ(template_children().size(), 1u) << [] {
    std::string s;
    for (const Proc& p : template_children()) s += std::to_string(p.pid) + " " + p.state + "\n";
    return s;
  }();
  const ExecutionResult pooled = c.run(inst, Mode::pool);
  EXPECT_EQ(pooled.status, ExecStatus::pass) << pooled.summary;
  EXPECT_EQ(c.run(inst, Mode::pool).world_id, pooled.world_id);
}

TEST(TemplateWorld, ARankKilledByASignalIsACrashWithItsSignal) {
  CaseDir dir("cases");
  const ControllerConfig cc = python_config(dir.path(), true);
  Controller c(cc);
  const ExecutionResult r = c.run(instance(cc, "tmpl/killed@2"), Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::crash) << r.summary;
  EXPECT_TRUE(r.as_expected);
  ASSERT_EQ(r.ranks.size(), 2u);
  ASSERT_TRUE(r.ranks[1].exit.has_value()) << r.summary;
  EXPECT_EQ(r.ranks[1].exit->signal, SIGKILL);
  EXPECT_THAT(r.summary, HasSubstr("rank 1"));
}

TEST(TemplateWorld, AHungRankIsAbortedAtTheDeadlineAndEveryRankReaped) {
  CaseDir dir("cases");
  const ControllerConfig cc = python_config(dir.path(), true);
  Controller c(cc);
  const ExecutionResult r = c.run(instance(cc, "tmpl/hang@2"), Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::hang) << r.summary;
  EXPECT_TRUE(r.as_expected);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_TRUE(r.ranks[1].watchdog.has_value()) << r.summary;
  // Only the template is left of everything that holds the case directory's path.
  const std::vector<Proc> left = running_with(dir.path().string());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_THAT(left[0].cmdline, HasSubstr("--template"));
  EXPECT_TRUE(zombie_children().empty());
}

TEST(TemplateWorld, AChildACaseLeftRunningIsKilledNamedAndReaped) {
  CaseDir dir("cases");
  const fs::path orphans = dir.path() / "orphans";
  ControllerConfig cc = python_config(dir.path(), true);
  cc.env.emplace_back("CPRR_TEST_ORPHANS", orphans.string());
  Controller c(cc);
  const ExecutionResult r = c.run(instance(cc, "tmpl/orphan@1"), Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::pass) << r.summary;
  std::ifstream in(orphans);
  pid_t orphan = 0;
  ASSERT_TRUE(in >> orphan);
  // Ended after its case, not left to outlive the world, and named.
  EXPECT_THAT(r.note, HasSubstr("rank 0 left 1 process running after case "));
  EXPECT_THAT(r.note, HasSubstr("(tmpl/orphan@1): pid " + std::to_string(orphan) + " ("));
  const auto runs = [&] {
    for (const Proc& p : processes()) {
      if (p.pid == orphan && p.state != 'Z') return true;
    }
    return false;
  };
  EXPECT_TRUE(eventually([&] { return !runs(); })) << "the orphan " << orphan << " still runs";
  // Its rank gone (the fresh world ends in the background), the dead child came here, the
  // subreaper, and the next world reaps it long before the controller ends.
  EXPECT_EQ(c.run(instance(cc, "tmpl/all_reduce@2"), Mode::fresh).status, ExecStatus::pass);
  EXPECT_TRUE(eventually([&] { return !fs::exists(fs::path("/proc") / std::to_string(orphan)); }))
      << "the orphan " << orphan << " was never reaped";
  EXPECT_TRUE(zombie_children().empty());
}

TEST(TemplateWorld, ATemplateThatDiedFailsOneStartAndTheNextStartsANewOne) {
  CaseDir dir("cases");
  const ControllerConfig cc = python_config(dir.path(), true);
  Controller c(cc);
  const CaseInstance inst = instance(cc, "tmpl/all_reduce@2");
  EXPECT_EQ(c.run(inst, Mode::fresh).status, ExecStatus::pass);
  const std::vector<Proc> first = template_children();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(::kill(first[0].pid, SIGKILL), 0);
  const ExecutionResult failed = c.run(inst, Mode::fresh);
  EXPECT_EQ(failed.status, ExecStatus::error);
  EXPECT_THAT(failed.summary, HasSubstr("rank 0 could not be started"));
  EXPECT_THAT(failed.summary,
              HasSubstr("the template process (pid " + std::to_string(first[0].pid)));
  EXPECT_THAT(failed.summary, HasSubstr("killed by signal 9"));
  EXPECT_THAT(failed.summary, HasSubstr("its output:"));
  const ExecutionResult again = c.run(inst, Mode::fresh);
  EXPECT_EQ(again.status, ExecStatus::pass) << again.summary;
  const std::vector<Proc> second = template_children();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0].pid, first[0].pid);
  EXPECT_TRUE(zombie_children().empty());
}

// A file whose import starts a thread would leave the template unforkable (it refuses, naming
// the thread): the template leaves that file to its ranks, and the case runs, forked or spawned.
TEST(TemplateWorld, ATemplateLeavesAFileThatStartsAThreadToItsRanks) {
  CaseDir dir("threaded_cases");
  const ControllerConfig forked = python_config(dir.path(), true);
  const CaseInstance inst = instance(forked, "threaded/noop@1");
  {
    Controller c(forked);
    for (Mode mode : {Mode::fresh, Mode::pool}) {
      const ExecutionResult r = c.run(inst, mode);
      EXPECT_EQ(r.status, ExecStatus::pass) << r.summary;
    }
  }
  Controller spawned(python_config(dir.path(), false));
  const ExecutionResult r = spawned.run(inst, Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::pass) << r.summary;
}

}  // namespace
}  // namespace cprr

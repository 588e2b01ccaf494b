// cpreplay --standby N: the worlds of the fresh replays a replay is certain to make next (a race's
// confirmation, the poison and placement replays) start while earlier replays run. On the CPU
// backend: the verdicts and statuses are the ones replays without standby give, every world started
// is used by a replay (none wasted), every world goes through foresee(), and the option is refused
// as cprecord refuses it.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "recorder/engine/world.h"
#include "replayer/replay.h"
#include "tests/cli/cli_run.h"

namespace cprr {
namespace {

using test::Cmd;
using test::run;
using test::Stderr;

// Every kind of replay loop: placements (allocator_order), poison then placements
// (uninitialized_read, at W=4), a race's confirmation, a polluter search (pooled), and cases that
// reproduce, at two world sizes.
const std::string kStandbyFilter =
    "'^(healthy/noop|bug/cp_maxlogit_race|bug/symmetric_address_order|bug/global_rng.*)@2$"
    "|^bug/uninitialized_read@4$|^healthy/noop@4$'";

// One recorded run per mode, shared by the suite.
class StandbyReplay : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir("cprr-standby"));
    for (const char* mode : {"both", "fresh"}) {
      const Cmd r = run(std::string(CPRR_CPRECORD_PATH) + " --db " + db(mode) + " --mode " + mode +
                        " --json --filter " + kStandbyFilter);
      ASSERT_EQ(r.code, 0) << r.out;
      const auto doc = nlohmann::json::parse(r.out);
      for (const auto& c : doc["cases"]) {
        (*ids_)[mode][c["label"].get<std::string>()] = c["id"].get<int64_t>();
      }
    }
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string db(const std::string& mode) { return *dir_ + "/" + mode + ".db"; }

  static inline std::string* dir_ = nullptr;
  static inline auto* ids_ = new std::map<std::string, std::map<std::string, int64_t>>();
};

// What one replay concluded, as compared across --standby values (the replay counts may differ:
// amplification is timing-dependent).
std::string outcome(const Cmd& r) {
  const auto doc = nlohmann::json::parse(r.out);
  return fmt::format("exit {} verdict {} fresh {} pool {} polluters {}", r.code,
                     doc["verdict"].dump(), doc["replayed"]["fresh"].dump(),
                     doc["replayed"]["pool"].dump(), doc["polluters"].dump());
}

TEST_F(StandbyReplay, EveryCaseGetsTheSameVerdictAndStatusesWithStandbyWorlds) {
  ASSERT_EQ(ids_->at("both").size(), 7u);
  for (const auto& [label, id] : ids_->at("both")) {
    SCOPED_TRACE(label);
    const std::string replay = std::string(CPRR_CPREPLAY_PATH) + " --db " + db("both") +
                               " --json --case " + std::to_string(id) + " --standby ";
    const Cmd off = run(replay + "0");
    const Cmd ahead = run(replay + "2");
    ASSERT_FALSE(off.out.empty());
    ASSERT_FALSE(ahead.out.empty());
    EXPECT_EQ(outcome(ahead), outcome(off));
  }
}

TEST_F(StandbyReplay, TriageGivesTheSameVerdictsWithStandbyWorlds) {
  std::map<int, std::map<std::string, std::string>> verdicts;
  for (const int n : {0, 2}) {
    const Cmd r = run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db("both") +
                      " --all --json --standby " + std::to_string(n));
    EXPECT_EQ(r.code, 0) << "--standby " << n << ": " << r.out;
    ASSERT_FALSE(r.out.empty());
    const auto doc = nlohmann::json::parse(r.out);
    for (const auto& c : doc["cases"]) {
      verdicts[n][c["label"].get<std::string>()] =
          c["verdict"].dump() + (c["as_expected"].get<bool>() ? "" : " UNEXPECTED");
    }
  }
  EXPECT_EQ(verdicts[0].size(), 4u) << "allocator order, state leak, race, uninitialized read";
  EXPECT_EQ(verdicts[2], verdicts[0]);
}

TEST(StandbyReplayUsage, IsAWholeNumberFromZeroToTheMaximum) {
  // Checked before anything runs (the database need not exist); any launcher takes it.
  for (const char* bad : {"-1", "65", "two"}) {
    const Cmd r =
        run(std::string(CPRR_CPREPLAY_PATH) + " --db /nonexistent.db --case 1 --standby " + bad,
            Stderr::merged);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--standby"), std::string::npos) << bad << ": " << r.out;
  }
  const Cmd help = run(std::string(CPRR_CPREPLAY_PATH) + " --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--standby"), std::string::npos);
}

// The worlds every replay's controller starts, counted: how many, and how many were started on
// another thread than the replay's (the controller's starter threads: through foresee()).
struct Started {
  std::mutex mu;
  int worlds = 0;
  int ahead = 0;
};

class CountingWorlds : public WorldFactory {
 public:
  CountingWorlds(std::shared_ptr<Started> started, std::thread::id replaying)
      : started_(std::move(started)), replaying_(replaying) {}
  std::unique_ptr<WorldHandle> make(const WorldConfig& config, uint64_t id) override {
    {
      std::lock_guard lock(started_->mu);
      ++started_->worlds;
      if (std::this_thread::get_id() != replaying_) ++started_->ahead;
    }
    return real_.make(config, id);
  }

 private:
  std::shared_ptr<Started> started_;
  std::thread::id replaying_;
  ProcessWorlds real_;
};

struct Counted {
  ReplayReport report;
  int worlds = 0;
  int ahead = 0;
};

Counted replay_counting(const std::string& db, int64_t case_id, int standby) {
  auto started = std::make_shared<Started>();
  const std::thread::id me = std::this_thread::get_id();
  ReplayOptions o{.db = db, .case_id = case_id, .mode = "fresh"};
  o.shared.run.standby = standby;
  o.worlds = [=] { return std::make_unique<CountingWorlds>(started, me); };
  Counted out{replay_case(o)};
  out.worlds = started->worlds;
  out.ahead = started->ahead;
  return out;
}

// Fresh replays only (a run recorded fresh, replayed fresh): one world per replay. With standby,
// every world starts through foresee() and none started goes unused; without it, every world
// starts on the replay's own thread when its replay does.
TEST_F(StandbyReplay, WorldsStartAheadOfTheReplaysCertainToComeAndNoneIsWasted) {
  const auto& ids = ids_->at("fresh");
  for (const char* label :
       {"bug/uninitialized_read@4", "bug/symmetric_address_order@2", "bug/cp_maxlogit_race@2"}) {
    SCOPED_TRACE(label);
    const Counted off = replay_counting(db("fresh"), ids.at(label), 0);
    const Counted ahead = replay_counting(db("fresh"), ids.at(label), 2);
    EXPECT_EQ(ahead.report.verdict, off.report.verdict);
    EXPECT_EQ(off.worlds, off.report.replays);
    EXPECT_EQ(off.ahead, 0);
    EXPECT_EQ(ahead.worlds, ahead.report.replays) << "a world started ahead went unused";
    // Every fresh replay names itself first to foresee(), so every world starts on a starter
    // thread: the ones certain to come while an earlier replay runs (how many is the
    // RaceConfirmation tests' and the controller's StandbyTest's to check), the others as their
    // replay begins.
    EXPECT_EQ(ahead.ahead, ahead.report.replays);
  }
}

}  // namespace
}  // namespace cprr

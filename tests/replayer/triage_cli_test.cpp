// cpreplay --all on a recorded run: it replays exactly the cases that failed, diverged or got a
// verdict, gives each its verdict next to the one it should get, honours the replay budget and
// exits 1 when a verdict is not the expected one (or a case was not replayed).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_run.h"

namespace cprr {
namespace {

using test::Cmd;
using test::run;
using test::Stderr;

class TriageCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string t = "/tmp/cprr-triage-cli-XXXXXX";
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = new std::string(t);
    const Cmd r = run(std::string(CPRR_CPRECORD_PATH) + " --db " + db() +
                      " --mode both --filter "
                      "'^healthy/noop@2$|^(bug|fixed)/(uninitialized_read|segfault_rank)@2$'");
    ASSERT_EQ(r.code, 0) << r.out;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string db() { return *dir_ + "/run.db"; }
  static inline std::string* dir_ = nullptr;
};

TEST_F(TriageCli, ReplaysTheFlaggedCasesOnlyAndGivesEachItsExpectedVerdict) {
  const Cmd r = run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db() + " --all --json");
  ASSERT_FALSE(r.out.empty());
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(doc["cases_in_run"], 4);
  std::map<std::string, nlohmann::json> rows;
  for (const auto& c : doc["cases"]) rows[c["label"]] = c;
  ASSERT_EQ(rows.size(), 2u) << "the twin and the healthy case are not triaged: " << r.out;
  EXPECT_EQ(rows.at("bug/uninitialized_read@2")["verdict"], "uninitialized_read");
  EXPECT_EQ(rows.at("bug/segfault_rank@2")["verdict"], "crash");
  EXPECT_EQ(rows.at("bug/segfault_rank@2")["expected"], "crash");
  for (const auto& [label, row] : rows) EXPECT_TRUE(row["as_expected"].get<bool>()) << label;
}

TEST_F(TriageCli, TheReplayBudgetStopsTheTriageAndCountsAgainstIt) {
  const Cmd r =
      run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db() + " --all --max-replays 1 --json");
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(r.code, 1);
  int not_replayed = 0;
  for (const auto& c : doc["cases"]) not_replayed += c["verdict"].is_null() ? 1 : 0;
  EXPECT_EQ(not_replayed, 1) << r.out;
}

TEST_F(TriageCli, BadArgumentsExitTwoWithAMessage) {
  const Cmd missing =
      run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db() + " --all --run 99", Stderr::merged);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.out.find("no such run"), std::string::npos) << missing.out;
  const Cmd both =
      run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db() + " --all --case 1", Stderr::merged);
  EXPECT_EQ(both.code, 2);
}

}  // namespace
}  // namespace cprr

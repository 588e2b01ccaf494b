// End-to-end on the CPU backend: the seeded stream races and their fixed twins through the two
// CLIs. cprecord must call every race case stream_race from its op log (even where the outputs
// agree) with the right op pair and buffer, and nothing else; cpreplay must name the same pair
// and confirm it with at least one dynamic check in at most 20 replays.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_run.h"

namespace cprr {
namespace {

using test::Cmd;
using test::kRecord;
using test::kReplay;
using test::run;

// What each seeded race is about: the buffer the first overlap names, and which ops race.
struct Expected {
  const char* buffer;
  const char* first_name;
  const char* second_name;
  bool cross_rank;
};
const std::map<std::string, Expected> kRaces{
    {"cp_maxlogit_race", {"max_logit_per_step", "attend_step1", "maximum_step1", false}},
    {"pinned_staging_reuse", {"staging", "copy", "fill staging recv_counts", false}},
    {"alltoallv_skipped_wait", {"window1", "put", "read1_from0", true}},
    {"use_after_free_across_streams", {"activations", "consume", "produce_next", false}},
};

class RaceCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string t = "/tmp/cprr-race-cli-XXXXXX";
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = new std::string(t);
    std::string filter = "'^(bug|fixed)/(";
    for (const auto& [name, _] : kRaces) filter += name + "|";
    filter.back() = ')';
    filter += "@2$'";
    const Cmd r = run(kRecord + " --db " + *dir_ +
                      "/run.db --mode both --repeat 2 --json --filter " + filter);
    code_ = r.code;
    doc_ = new nlohmann::json(nlohmann::json::parse(r.out));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete doc_;
  }
  static inline std::string* dir_ = nullptr;
  static inline nlohmann::json* doc_ = nullptr;
  static inline int code_ = -1;
};

TEST_F(RaceCli, RecordNamesEveryRaceAndFindsNoneInTheTwins) {
  EXPECT_EQ(code_, 0) << "seeded races are expected; a finding anywhere else is not";
  int bugs = 0, twins = 0;
  for (const auto& c : (*doc_)["cases"]) {
    const std::string name = c["name"];
    const std::string base = name.substr(name.find('/') + 1);
    ASSERT_TRUE(kRaces.count(base)) << name;
    if (name.rfind("fixed/", 0) == 0) {
      ++twins;
      EXPECT_TRUE(c["race"].is_null()) << name << ": " << c["race"].dump();
      EXPECT_TRUE(c["verdict"].is_null()) << name;
      continue;
    }
    ++bugs;
    const Expected& want = kRaces.at(base);
    EXPECT_EQ(c["verdict"], "stream_race") << name;
    ASSERT_FALSE(c["race"].is_null()) << name;
    const auto& race = c["race"];
    EXPECT_EQ(race["buffer"], want.buffer) << name;
    EXPECT_EQ(race["first"]["name"], want.first_name) << name;
    EXPECT_EQ(race["second"]["name"], want.second_name) << name;
    EXPECT_EQ(race["ranks"][0] != race["ranks"][1], want.cross_rank) << name;
    EXPECT_EQ(race["executions_with_race"], 4) << name << ": every execution's log shows it";
    EXPECT_TRUE(race["confirmed_by"].empty()) << "record time confirms nothing dynamically";
    // The fix orders the later op after its group's latest op per thread, checked on the log.
    EXPECT_TRUE(race["fix_verified"].get<bool>()) << name << ": " << race["fix"];
    EXPECT_GE(race["group_pairs"].get<int>(), 1) << name;
    ASSERT_FALSE(race["fix_after"].empty()) << name;
    const std::string after = "op #" + race["fix_after"].back()["op"].dump() + " ";
    EXPECT_NE(race["fix"].get<std::string>().find(after), std::string::npos)
        << name << ": " << race["fix"] << " names no " << after;
    EXPECT_TRUE(c["as_expected"].get<bool>()) << name;
  }
  EXPECT_EQ(bugs, 4);
  EXPECT_EQ(twins, 4);
}

TEST_F(RaceCli, ReplayConfirmsEveryRaceAndReproducesEveryTwin) {
  for (const auto& c : (*doc_)["cases"]) {
    const std::string name = c["name"];
    const Cmd r = run(kReplay + " --db " + *dir_ + "/run.db --json --case " + c["id"].dump());
    ASSERT_FALSE(r.out.empty()) << name;
    const auto rep = nlohmann::json::parse(r.out);
    if (name.rfind("fixed/", 0) == 0) {
      EXPECT_EQ(rep["verdict"], "reproduced") << name;
      EXPECT_EQ(r.code, 0) << name;
      EXPECT_TRUE(rep["race"].is_null()) << name;
      continue;
    }
    const Expected& want = kRaces.at(name.substr(name.find('/') + 1));
    EXPECT_EQ(r.code, 1) << name;
    EXPECT_EQ(rep["verdict"], "stream_race") << name;
    ASSERT_FALSE(rep["race"].is_null()) << name;
    EXPECT_EQ(rep["race"]["first"], c["race"]["first"]) << name << ": the pair the record named";
    EXPECT_EQ(rep["race"]["second"], c["race"]["second"]) << name;
    EXPECT_EQ(rep["race"]["buffer"], want.buffer) << name;
    EXPECT_FALSE(rep["race"]["confirmed_by"].empty()) << name << "\n" << rep["log"].dump(1);
    EXPECT_LE(rep["replays"].get<int>(), 20) << name;
    const auto& conf = rep["confirmation"];
    if (!conf["sync_edge"].is_null()) {
      // The bisected boundary must lie between the two racing ops.
      EXPECT_TRUE(conf["sync_agrees"].get<bool>()) << name << "\n" << rep["log"].dump(1);
      const auto after = conf["sync_edge"]["after_op"].get<uint64_t>();
      EXPECT_GE(after, rep["race"]["first"]["op"].get<uint64_t>()) << name;
      EXPECT_LT(after, rep["race"]["second"]["op"].get<uint64_t>()) << name;
    } else if (!want.cross_rank) {
      // A race on one rank is bisected, or shown by the fix applied, which names the order the
      // recorded runs took (replayer/race_confirmation.h).
      const auto& by = rep["race"]["confirmed_by"];
      EXPECT_NE(std::find(by.begin(), by.end(), "fix_applied"), by.end())
          << name << ": a race on one rank is bisected or shown by its fix\n"
          << rep["log"].dump(1);
      EXPECT_NE(rep["race_order"].get<std::string>().find("the recorded runs took "),
                std::string::npos)
          << name;
    }
  }
}

TEST_F(RaceCli, ListJudgesAsTheRecordDidAndMarksTheRaces) {
  const Cmd r = run(kReplay + " --db " + *dir_ + "/run.db --list --json");
  ASSERT_EQ(r.code, 0);
  const auto list = nlohmann::json::parse(r.out);
  std::map<int64_t, nlohmann::json> listed;
  for (const auto& c : list["cases"]) listed[c["id"].get<int64_t>()] = c;
  for (const auto& c : (*doc_)["cases"]) {
    const auto& l = listed.at(c["id"].get<int64_t>());
    EXPECT_EQ(l["as_expected"], c["as_expected"]) << c["label"];
    EXPECT_EQ(l["verdict"], c["verdict"]) << c["label"];
    EXPECT_EQ(l["stream_race"].is_null(), c["race"].is_null()) << c["label"];
  }
  const Cmd text = run(kReplay + " --db " + *dir_ + "/run.db --list");
  EXPECT_NE(text.out.find("<- stream race"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace cprr

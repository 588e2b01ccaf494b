// End-to-end on the CPU backend: race candidates (accesses of unknown direction, from opaque
// library calls: corpus/opaque_calls.cpp) through the two CLIs. cprecord names a candidate as
// such and counts nothing; cpreplay confirms the planted one (stream_race, the sides it rests on
// marked inferred), drops the one two readers make (reproduced, the candidate in the notes), and
// when the readers' candidate comes first, drops it for the planted one behind it; a race every
// recorded run loses the same way is confirmed by applying its fix, which names that order.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/replayer/cli_run.h"

namespace cprr {
namespace {

using test::Cmd;
using test::run;

const std::string kRecord = CPRR_CPRECORD_PATH;
const std::string kReplay = CPRR_CPREPLAY_PATH;

class RaceCandidateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string t = "/tmp/cprr-race-candidate-XXXXXX";
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = new std::string(t);
    const Cmd r =
        run(kRecord + " --db " + *dir_ +
            "/run.db --mode both --repeat 2 --json --filter '^(bug|fixed|healthy)/opaque_'");
    code_ = r.code;
    doc_ = new nlohmann::json(nlohmann::json::parse(r.out));
    cases_ = new std::map<std::string, nlohmann::json>();
    for (const auto& c : (*doc_)["cases"]) cases_->emplace(c["name"].get<std::string>(), c);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete doc_;
    delete cases_;
  }
  static nlohmann::json replay(const nlohmann::json& c, int* code) {
    const Cmd r = run(kReplay + " --db " + *dir_ + "/run.db --json --case " + c["id"].dump());
    *code = r.code;
    return nlohmann::json::parse(r.out);
  }
  static inline std::string* dir_ = nullptr;
  static inline nlohmann::json* doc_ = nullptr;
  static inline std::map<std::string, nlohmann::json>* cases_ = nullptr;
  static inline int code_ = -1;
};

TEST_F(RaceCandidateCli, RecordNamesCandidatesAsSuchAndCountsNone) {
  EXPECT_EQ(code_, 0) << "a candidate counts against nothing";
  ASSERT_EQ(cases_->size(), 7u) << doc_->dump(1);
  for (const char* name : {"bug/opaque_call_race", "healthy/opaque_calls_read_shared"}) {
    const auto& c = cases_->at(name);
    EXPECT_TRUE(c["as_expected"].get<bool>()) << name;
    EXPECT_NE(c["verdict"], "stream_race") << name << ": a candidate is no verdict";
    ASSERT_FALSE(c["race"].is_null()) << name;
    EXPECT_TRUE(c["race"]["candidate"].get<bool>()) << name;
    EXPECT_TRUE(c["race"]["first"]["inferred"].get<bool>()) << name;
  }
  const auto& bug = cases_->at("bug/opaque_call_race")["race"];
  EXPECT_EQ(bug["buffer"], "out");
  EXPECT_EQ(bug["first"]["name"], "lib_copy");
  EXPECT_EQ(bug["second"]["name"], "consume");
  EXPECT_FALSE(bug["second"]["inferred"].get<bool>()) << "consume declares its read";
  const auto& shared = cases_->at("healthy/opaque_calls_read_shared")["race"];
  EXPECT_EQ(shared["buffer"], "weights");
  EXPECT_TRUE(shared["second"]["inferred"].get<bool>());
  EXPECT_TRUE(cases_->at("fixed/opaque_call_race")["race"].is_null());
}

TEST_F(RaceCandidateCli, ReplayConfirmsThePlantedCandidateAndDropsTheReadersOne) {
  int code = -1;
  const nlohmann::json bug = replay(cases_->at("bug/opaque_call_race"), &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(bug["verdict"], "stream_race") << bug["log"].dump(1);
  ASSERT_FALSE(bug["race"].is_null());
  EXPECT_TRUE(bug["race"]["candidate"].get<bool>());
  EXPECT_EQ(bug["race"]["first"]["name"], "lib_copy");
  EXPECT_FALSE(bug["race"]["confirmed_by"].empty()) << bug["log"].dump(1);
  EXPECT_LE(bug["replays"].get<int>(), 20);

  const nlohmann::json shared = replay(cases_->at("healthy/opaque_calls_read_shared"), &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(shared["verdict"], "reproduced") << shared["log"].dump(1);
  EXPECT_TRUE(shared["race"].is_null()) << "an unconfirmed candidate is no finding";
  bool noted = false;
  for (const auto& note : shared["race_notes"]) {
    noted = noted || note.get<std::string>().find("did not show") != std::string::npos;
  }
  EXPECT_TRUE(noted) << shared["race_notes"].dump(1);

  const nlohmann::json twin = replay(cases_->at("fixed/opaque_call_race"), &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(twin["verdict"], "reproduced");
  EXPECT_TRUE(twin["race"].is_null());
}

// The readers' candidate (on 'weights') comes first in report order; the planted race (on 'out')
// is behind it among the execution's other races. Outputs a perturbation changes do not confirm
// the readers' pair: the sync bisection puts their cause between the planted pair's ops.
TEST_F(RaceCandidateCli, ACandidateTheReplaysDoNotPinGivesWayToTheNextOne) {
  const auto& recorded = cases_->at("bug/opaque_race_behind_shared_reads")["race"];
  ASSERT_FALSE(recorded.is_null());
  EXPECT_EQ(recorded["buffer"], "weights") << "the readers' candidate is the record's first";
  int code = -1;
  const nlohmann::json bug = replay(cases_->at("bug/opaque_race_behind_shared_reads"), &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(bug["verdict"], "stream_race") << bug["log"].dump(1);
  ASSERT_FALSE(bug["race"].is_null()) << bug["log"].dump(1);
  EXPECT_EQ(bug["race"]["buffer"], "out");
  EXPECT_EQ(bug["race"]["first"]["name"], "lib_copy");
  EXPECT_EQ(bug["race"]["second"]["name"], "consume");
  EXPECT_TRUE(bug["confirmation"]["sync_agrees"].get<bool>()) << bug["log"].dump(1);
  ASSERT_EQ(bug["race_notes"].size(), 1u) << bug["race_notes"].dump(1);
  EXPECT_NE(bug["race_notes"][0].get<std::string>().find("'weights'"), std::string::npos);

  const nlohmann::json twin = replay(cases_->at("fixed/opaque_race_behind_shared_reads"), &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(twin["verdict"], "reproduced") << twin["log"].dump(1);
  EXPECT_TRUE(twin["race"].is_null());
}

// The consumer wins every recorded run (the library call starts 100 ms late): delays only keep
// that order. Holding the consumer until the call completed changes the outputs of runs that
// agree with each other: the race is confirmed, with the order the recorded runs took, in a few
// replays (issue 57).
TEST_F(RaceCandidateCli, ARaceTheRecordedRunsAlwaysLoseIsConfirmedByItsFixWithThatOrder) {
  const auto& rec = cases_->at("bug/opaque_call_lost_race");
  ASSERT_FALSE(rec["race"].is_null()) << rec.dump(1);
  EXPECT_TRUE(rec["race"]["candidate"].get<bool>());
  EXPECT_TRUE(rec["fresh_vs_pool"].is_null()) << "every recorded run reads early alike";
  int code = -1;
  const nlohmann::json bug = replay(rec, &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(bug["verdict"], "stream_race") << bug["log"].dump(1);
  ASSERT_FALSE(bug["race"].is_null()) << bug["log"].dump(1);
  EXPECT_EQ(bug["race"]["first"]["name"], "lib_copy_late");
  EXPECT_EQ(bug["race"]["second"]["name"], "consume");
  const auto& by = bug["race"]["confirmed_by"];
  EXPECT_NE(std::find(by.begin(), by.end(), "fix_applied"), by.end()) << bug["log"].dump(1);
  EXPECT_NE(bug["race_order"].get<std::string>().find(
                "the recorded runs took rank 0 stream 0 op #"),
            std::string::npos)
      << bug["race_order"];
  EXPECT_NE(bug["race_order"].get<std::string>().find("(kernel 'consume') before rank 0 stream"),
            std::string::npos)
      << bug["race_order"];
  EXPECT_LE(bug["replays"].get<int>(), 6) << "no seeds once the fix showed it";

  const nlohmann::json twin = replay(cases_->at("fixed/opaque_call_lost_race"), &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(twin["verdict"], "reproduced") << twin["log"].dump(1);
  EXPECT_TRUE(twin["race"].is_null());
}

}  // namespace
}  // namespace cprr

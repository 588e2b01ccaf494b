// End-to-end on the CPU backend: race candidates (accesses of unknown direction, from opaque
// library calls: corpus/opaque_calls.cpp) through the two CLIs. cprecord names a candidate as
// such and counts nothing. cpreplay's probe replay learns what each call wrote: the
// planted pair is then a race of known directions, confirmed (stream_race); the pair two readers
// make is no candidate at all (reproduced, in three replays), also where it came first in the
// record; a race every recorded run loses the same way is confirmed by applying its fix, which
// names that order.
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
  EXPECT_FALSE(bug["race"]["candidate"].get<bool>()) << "the probe saw lib_copy write 'out'";
  EXPECT_FALSE(bug["race"]["first"]["inferred"].get<bool>());
  EXPECT_EQ(bug["race"]["first"]["name"], "lib_copy");
  EXPECT_FALSE(bug["race"]["confirmed_by"].empty()) << bug["log"].dump(1);
  EXPECT_LE(bug["replays"].get<int>(), 20);
  ASSERT_EQ(bug["learned"].size(), 2u) << bug["log"].dump(1);  // lib_copy on each rank
  EXPECT_NE(bug["learned"][0].get<std::string>().find(
                "(native 'lib_copy'): writes 'out' [0, 65536); leaves 'weights' [0, 65536) "
                "unchanged"),
            std::string::npos)
      << bug["learned"].dump(1);

  const nlohmann::json shared = replay(cases_->at("healthy/opaque_calls_read_shared"), &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(shared["verdict"], "reproduced") << shared["log"].dump(1);
  EXPECT_TRUE(shared["race"].is_null()) << "two calls that left the weights unchanged";
  EXPECT_TRUE(shared["race_notes"].empty()) << "no candidate to drop: " << shared["race_notes"];
  EXPECT_EQ(shared["learned"].size(), 4u) << shared["log"].dump(1);
  EXPECT_GE(shared["replays"].get<int>(), 2) << "fresh and pooled";
  EXPECT_LE(shared["replays"].get<int>(), 3) << "beyond fresh, pooled and the probe: nothing to "
                                                "confirm";

  const nlohmann::json twin = replay(cases_->at("fixed/opaque_call_race"), &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(twin["verdict"], "reproduced");
  EXPECT_TRUE(twin["race"].is_null());
}

// The readers' candidate (on 'weights') comes first in the record's report order; the planted
// race (on 'out') is behind it. Once the probe saw neither reader change the weights, the planted
// pair is the one race of the case, found and confirmed with no candidate dropped on the way.
TEST_F(RaceCandidateCli, TheReadersCandidateFirstInTheRecordIsGoneOnceTheProbeSeesTheWeights) {
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
  EXPECT_FALSE(bug["race"]["candidate"].get<bool>());
  EXPECT_FALSE(bug["race"]["confirmed_by"].empty()) << bug["log"].dump(1);
  EXPECT_TRUE(bug["race_notes"].empty()) << bug["race_notes"].dump(1);
  EXPECT_TRUE(bug["race"]["more"].empty()) << "the readers' pair is no race at all";

  const nlohmann::json twin = replay(cases_->at("fixed/opaque_race_behind_shared_reads"), &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(twin["verdict"], "reproduced") << twin["log"].dump(1);
  EXPECT_TRUE(twin["race"].is_null());
}

// The consumer wins every recorded run (the library call waits for it): delays only keep
// that order. Holding the consumer until the call completed changes the outputs of runs that
// agree with each other: the race is confirmed, with the order the recorded runs took, in a few
// replays.
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
  EXPECT_NE(
      bug["race_order"].get<std::string>().find("the recorded runs took rank 0 stream 0 op #"),
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

// cprecord over the C++ groups of corpus/groups.cpp (Context::split, a 2x2 mesh at W=4), pooled
// and fresh: each planted bug is named with its group, the group's ranks and the collective's
// (or message's) number; the twins and the healthy cases are clean; a rank's groups are in the
// JSON with what made them. The C++ twins of tests/python/test_mesh_groups.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/commands/record_support.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace record_test;  // NOLINT(google-build-using-namespace): this file's own helpers

const json& recorded_groups() {
  static const json doc = [] {
    RecordOptions o = opts(kWorker,
                           "mesh_groups|tp_group_mismatch|dp_group|group_pipeline|moe_counts|"
                           "group_send_buffer|same_ranks_two_groups|group_of_some_ranks");
    o.db = test_db() + ".groups";
    o.mode = "both";
    o.backend = "cpu";
    const Recorded r = record(o);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    return json::parse(r.out);
  }();
  return doc;
}

const json& case_of(const std::string& label) {
  const json* c = find_case(recorded_groups(), label);
  EXPECT_NE(c, nullptr) << label;
  static const json none = json::object();
  return c != nullptr ? *c : none;
}

TEST(RecordGroups, EveryCaseIsAsExpectedAndOnlyTheBugsHaveVerdicts) {
  const json& doc = recorded_groups();
  ASSERT_EQ(doc.at("cases").size(), 16u);
  for (const json& c : doc.at("cases")) {
    EXPECT_TRUE(c.at("as_expected").get<bool>()) << c.dump();
    const std::string name = c.at("name");
    if (name.rfind("bug/", 0) == 0) {
      EXPECT_FALSE(c.at("verdict").is_null()) << c.dump();
    } else {
      EXPECT_TRUE(c.at("verdict").is_null()) << c.dump();
    }
  }
}

TEST(RecordGroups, AMismatchInsideOneTpGroupNamesTheGroupItsRanksAndNumber) {
  const json& m = case_of("bug/tp_group_mismatch@4").at("collective_mismatch");
  EXPECT_EQ(m.at("group"), 2);
  EXPECT_EQ(m.at("seq"), 0);
  EXPECT_EQ(m.at("ranks"), json::array({2, 3}));
  EXPECT_THAT(m.at("detail").get<std::string>(),
              StartsWith("group 2 (split #0 color 1, ranks 2,3): collective #0 (all_reduce): "
                         "rank 2 has bytes 512, rank 3 has bytes 384"));
}

TEST(RecordGroups, ADpGroupHangNamesTheGroupAndTheMemberThatNeverJoined) {
  for (const json& e : case_of("bug/dp_group_hang@4").at("executions")) {
    EXPECT_EQ(e.at("status"), "hang");
    EXPECT_THAT(e.at("summary").get<std::string>(),
                StartsWith("hang: group 4 (split #1 color 1, ranks 1,3): rank 3 never joined "
                           "collective #0 (all_reduce)"));
  }
}

TEST(RecordGroups, ARecvNeverSentInAGroupNamesWorldRanksTheChannelAndTheNumber) {
  // Stages are world ranks 3, 2, 1, 0: stage 1 (rank 2) sends 3 of 4, stage 2 (rank 1) waits.
  for (const json& e : case_of("bug/group_pipeline_recv_never_sent@4").at("executions")) {
    EXPECT_THAT(
        e.at("summary").get<std::string>(),
        StartsWith("hang: rank 1 blocked in recv #3 from rank 2 of group 1; rank 2 sent 3"));
  }
}

TEST(RecordGroups, AnAllToAllWhoseCountsWereNeverExchangedIsNamedPerPeer) {
  // Rank 0 routes (0 + 2*1) % 5 + 1 = 3 tokens of 32 bytes to rank 1; rank 1 expects what it
  // routes to rank 0: (1 + 0) % 5 + 1 = 2.
  const json& m = case_of("bug/moe_counts_not_exchanged@4").at("collective_mismatch");
  EXPECT_EQ(m.at("field"), "split");
  EXPECT_THAT(m.at("detail").get<std::string>(),
              StartsWith("group 1 (split #0 color 0, ranks 0,1): collective #0 (all_to_all_v): "
                         "rank 0 sends 96 bytes to rank 1, rank 1 expects 64 bytes"));
}

TEST(RecordGroups, ASendBufferRewrittenInAGroupIsARaceOnItsMessage) {
  const json& c = case_of("bug/group_send_buffer_rewritten@4");
  EXPECT_EQ(c.at("verdict"), "stream_race");
  EXPECT_THAT(c.at("race").at("detail").get<std::string>(),
              HasSubstr("'send #0 to rank 1 (group 1)'"));
}

TEST(RecordGroups, EachRankRecordsItsGroupsWithTheSplitThatMadeThem) {
  const json& e = case_of("healthy/mesh_groups@4").at("executions")[0];
  const json want = json::array({
      {{"id", 1}, {"ranks", {0, 1}}, {"backend", "gloo"}, {"name", "split #0 color 0"}},
      {{"id", 2}, {"ranks", {2, 3}}, {"backend", "gloo"}, {"name", "split #0 color 1"}},
      {{"id", 3}, {"ranks", {0, 2}}, {"backend", "gloo"}, {"name", "split #1 color 0"}},
      {{"id", 4}, {"ranks", {1, 3}}, {"backend", "gloo"}, {"name", "split #1 color 1"}},
  });
  EXPECT_EQ(e.at("groups"), want);
}

}  // namespace
}  // namespace cprr

// The views of schema.sql: the common questions answered without a join, on a run written by the
// real RecordWriter (statuses per mode, the judgement, the unexpected cases, the slowest runs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schema/record_writer.h"
#include "schema/store.h"
#include "tests/schema/record_samples.h"

namespace cprr {
namespace {

using namespace cprr::samples;

ExecutionResult timed(Mode mode, ExecStatus status, double wall_ms, double startup_ms = 0) {
  ExecutionResult r = execution(mode, 1, 1);
  r.status = status;
  r.wall_ms = wall_ms;
  r.startup_ms = startup_ms;
  return r;
}

class ViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RecordWriter w(
        db_.path(),
        RunMeta{
            BackendKind::cpu, {Mode::fresh, Mode::pool}, Placement::best_fit, "/bin/worker", {}});
    ids_ = w.add_cases({instance(1, "a/leaky", {}, 2), instance(2, "a/fine", {}, 2),
                        instance(3, "a/unjudged", {}, 4)});
    w.write(timed(Mode::fresh, ExecStatus::pass, 30, 25), ids_[0]);
    w.write(timed(Mode::pool, ExecStatus::fail, 7), ids_[0]);
    w.write(timed(Mode::pool, ExecStatus::pass, 5), ids_[0]);  // a repeat
    w.write(timed(Mode::fresh, ExecStatus::pass, 40, 38), ids_[1]);
    w.judge_cases({{ids_[0], "nondeterministic", false, "rank 1 output 'out' #0 differs"},
                   {ids_[1], std::nullopt, true, std::nullopt}});
  }

  /// Every row of `sql`, each as its columns' text joined by '|' (NULL as "NULL").
  std::vector<std::string> rows(const std::string& sql) const {
    const Database raw = Database::open(db_.path(), Database::Mode::read_only);
    Statement st(raw, sql);
    std::vector<std::string> out;
    while (st.step()) {
      std::string line;
      for (int c = 0; c < st.columns(); ++c) {
        line += (c ? "|" : "") + (st.is_null(c) ? std::string("NULL") : st.text(c));
      }
      out.push_back(line);
    }
    return out;
  }

  TempDb db_;
  std::vector<int64_t> ids_;
};

TEST_F(ViewsTest, CaseSummaryHasOneRowPerCaseWithStatusesPerModeAndTheJudgement) {
  const auto got = rows(
      "SELECT case_id, label, fresh_status, pool_status, fresh_vs_pool, verdict, as_expected, "
      "replay FROM case_summary ORDER BY case_id");
  const std::string a = std::to_string(ids_[0]), b = std::to_string(ids_[1]),
                    c = std::to_string(ids_[2]);
  ASSERT_EQ(got.size(), 3u);
  // The pooled statuses are distinct values in any order.
  EXPECT_TRUE(got[0] == a +
                            "|a/leaky@2|pass|fail,pass|rank 1 output 'out' #0 differs|"
                            "nondeterministic|0|cpreplay --case " +
                            a ||
              got[0] == a +
                            "|a/leaky@2|pass|pass,fail|rank 1 output 'out' #0 differs|"
                            "nondeterministic|0|cpreplay --case " +
                            a)
      << got[0];
  EXPECT_EQ(got[1], b + "|a/fine@2|pass|NULL|NULL|NULL|1|cpreplay --case " + b);
  EXPECT_EQ(got[2], c + "|a/unjudged@4|NULL|NULL|NULL|NULL|NULL|cpreplay --case " + c);
}

TEST_F(ViewsTest, UnexpectedCaseListsOnlyWhatCountedAgainstTheRun) {
  EXPECT_EQ(rows("SELECT case_id, label FROM unexpected_case"),
            std::vector<std::string>{std::to_string(ids_[0]) + "|a/leaky@2"});
}

TEST_F(ViewsTest, SlowestExecutionComesFirstWithItsStartUpSplitOff) {
  EXPECT_EQ(rows("SELECT label, mode, status, wall_ms, startup_ms, case_ms FROM "
                 "slowest_execution"),
            (std::vector<std::string>{
                "a/fine@2|fresh|pass|40.0|38.0|2.0", "a/leaky@2|fresh|pass|30.0|25.0|5.0",
                "a/leaky@2|pool|fail|7.0|0.0|7.0", "a/leaky@2|pool|pass|5.0|0.0|5.0"}));
}

}  // namespace
}  // namespace cprr

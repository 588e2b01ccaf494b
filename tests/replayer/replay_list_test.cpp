// cpreplay --list in-process on a database the store's writer wrote: where each case's collectives
// went and the GPU each rank ran on, in the table and in the JSON.
#include "replayer/replay_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "schema/record_writer.h"
#include "tests/analysis/analysis_support.h"
#include "tests/schema/record_samples.h"

namespace cprr {
namespace {

using ::testing::EndsWith;

/// A passing execution of two ranks with outputs `out`, run by `world` through `collectives`.
ExecutionResult ran(uint64_t world, Mode mode, std::string_view collectives, std::string gpus,
                    const std::string& out) {
  ExecutionResult e =
      test::through(test::execution(0, mode, ExecStatus::pass, {out, out}), collectives);
  e.world_id = world;
  e.pool_position = 1;
  e.rank_gpus = std::move(gpus);
  return e;
}

std::vector<CaseInstance> healthy_plan(const std::string& name, uint32_t cases) {
  std::vector<CaseInstance> plan;
  for (uint32_t i = 1; i <= cases; ++i) {
    plan.push_back(samples::instance(i, name + std::to_string(i), {}, 2));
    plan.back().info.options.expect = Expect::pass;
    plan.back().info.options.seeded_bug.clear();
  }
  return plan;
}

class ReplayList : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      RecordWriter w(db_.path(), RunMeta{BackendKind::cuda,
                                         {Mode::fresh, Mode::pool},
                                         Placement::best_fit,
                                         "/bin/worker",
                                         {}});
      const auto ids = w.add_cases(healthy_plan("gpu/case", 2));
      // Both modes on ranks sharing GPU 0.
      w.write(ran(1, Mode::fresh, kCollectivesGlooStaged, "0,0", "a"), ids[0]);
      w.write(ran(2, Mode::pool, kCollectivesGlooStaged, "0,0", "a"), ids[0]);
      // Fresh on a GPU per rank, pooled sharing one: the outputs differ by reduction order.
      w.write(ran(3, Mode::fresh, kCollectivesNccl, "0,1", "a"), ids[1]);
      w.write(ran(2, Mode::pool, kCollectivesGlooStaged, "0,0", "b"), ids[1]);
      w.finish(0);
    }
    RecordWriter w(
        db_.path(),
        RunMeta{BackendKind::cpu, {Mode::fresh}, Placement::best_fit, "/bin/worker", {}});
    w.write(ran(1, Mode::fresh, kCollectivesGloo, "", "a"),
            w.add_cases(healthy_plan("cpu/case", 1))[0]);
    w.finish(0);
  }

  /// The table line of the case labelled `label`.
  std::string line_of(const std::string& label) const {
    std::ostringstream out;
    list_db(out, db_.path(), false);
    std::istringstream lines(out.str());
    for (std::string line; std::getline(lines, line);) {
      if (line.find(label) != std::string::npos) return line;
    }
    ADD_FAILURE() << "no line for " << label << " in:\n" << out.str();
    return {};
  }

  samples::TempDb db_;
};

TEST_F(ReplayList, TheTableSaysWhereEachCasesCollectivesWent) {
  EXPECT_THAT(line_of("gpu/case1@2"),
              EndsWith("fresh=pass pool=pass  collectives gloo_staged, ranks on GPUs 0,0"));
  EXPECT_THAT(line_of("gpu/case2@2"),
              EndsWith("fresh=pass pool=pass  fresh: collectives nccl, ranks on GPUs 0,1; pool: "
                       "collectives gloo_staged, ranks on GPUs 0,0  <- fresh and pooled differ "
                       "across transports"));
  EXPECT_THAT(line_of("cpu/case1@2"), EndsWith("fresh=pass")) << "the cpu backend's gloo: nothing";
}

TEST_F(ReplayList, TheJsonHasEachExecutionsTransportAndGpus) {
  std::ostringstream out;
  list_db(out, db_.path(), true);
  const auto doc = nlohmann::json::parse(out.str());
  ASSERT_EQ(doc["cases"].size(), 3u);
  const auto& same = doc["cases"][0];
  EXPECT_EQ(same["executions"][1]["collectives"], "gloo_staged");
  EXPECT_EQ(same["executions"][1]["rank_gpus"], "0,0");
  EXPECT_FALSE(same["fresh_vs_pool_differs"].get<bool>());
  EXPECT_FALSE(same["fresh_vs_pool_across_transports"].get<bool>());
  const auto& across = doc["cases"][1];
  EXPECT_EQ(across["executions"][0]["collectives"], "nccl");
  EXPECT_EQ(across["executions"][0]["rank_gpus"], "0,1");
  EXPECT_TRUE(across["fresh_vs_pool_differs"].get<bool>());
  EXPECT_TRUE(across["fresh_vs_pool_across_transports"].get<bool>());
  EXPECT_TRUE(across["as_expected"].get<bool>()) << "reduction order is no state leak";
  const auto& cpu = doc["cases"][2];
  EXPECT_EQ(cpu["executions"][0]["collectives"], "gloo");
  EXPECT_EQ(cpu["executions"][0]["rank_gpus"], "");
}

}  // namespace
}  // namespace cprr

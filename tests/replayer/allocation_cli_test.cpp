// End-to-end on the CPU backend: seed 002's allocator-order bug, the uninitialized read and the
// collective size mismatch, each with its twin, through the two CLIs.
// The symmetric layout check names the accumulator placed at different offsets at record time and
// in cpreplay; the CPU's symmetric all-reduce (each rank reads its peers' windows at its own
// offset, as NCCL's symmetric kernels do) really returns wrong sums for it.
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

TEST(AllocationCli, TheSymmetricAddressOrderBugIsAllocatorOrderAndItsTwinIsClean) {
  std::string dir = "/tmp/cprr-alloc-cli-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string db = dir + "/run.db";
  const Cmd rec = run(std::string(CPRR_CPRECORD_PATH) + " --db " + db +
                      " --mode both --json --filter '^(bug|fixed)/symmetric_address_order@2$'");
  ASSERT_FALSE(rec.out.empty());
  const auto doc = nlohmann::json::parse(rec.out);
  EXPECT_EQ(rec.code, 0);
  std::map<std::string, nlohmann::json> cases;
  for (const auto& c : doc["cases"]) cases[c["name"]] = c;
  const auto& bug = cases.at("bug/symmetric_address_order");
  const auto& twin = cases.at("fixed/symmetric_address_order");
  EXPECT_EQ(bug["verdict"], "allocator_order");
  ASSERT_FALSE(bug["allocation"].is_null());
  EXPECT_EQ(bug["allocation"]["ranks"][0]["name"], "acc");
  EXPECT_NE(bug["allocation"]["ranks"][0]["offset"], bug["allocation"]["ranks"][1]["offset"]);
  EXPECT_TRUE(bug["as_expected"].get<bool>()) << "a seeded allocator_order bug, found";
  // Every execution says what made its symmetric all-reduce symmetric.
  for (const auto& e : bug["executions"]) {
    EXPECT_NE(e["symmetric_pool"].get<std::string>().find("shared-memory window"),
              std::string::npos)
        << e["symmetric_pool"];
  }
  EXPECT_TRUE(twin["allocation"].is_null());
  EXPECT_TRUE(twin["verdict"].is_null());
  // Rank 0's sums: the twin's are right (it checks them); the bug's differ from them.
  const auto acc_hash = [](const nlohmann::json& c) {
    return c["executions"][0]["ranks"][0]["outputs"][0]["hash"].get<std::string>();
  };
  EXPECT_NE(acc_hash(bug), acc_hash(twin)) << "the symmetric all-reduce read the wrong slots";

  for (const auto* c : {&bug, &twin}) {
    const Cmd rep = run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db + " --json --case " +
                        (*c)["id"].dump());
    const auto r = nlohmann::json::parse(rep.out);
    const bool is_bug = c == &bug;
    EXPECT_EQ(r["verdict"], is_bug ? "allocator_order" : "reproduced");
    EXPECT_EQ(rep.code, is_bug ? 1 : 0);
    EXPECT_EQ(r["allocation"].is_null(), !is_bug);
    if (!is_bug) continue;
    // Placement replays: address-ordered reuse keeps the layouts apart; never reusing a block
    // puts the accumulator at one offset everywhere, and the sums change (they become right).
    ASSERT_EQ(r["placements"].size(), 4u) << rep.out;
    EXPECT_EQ(r["placements"][0]["placement"], "best_fit");
    EXPECT_FALSE(r["placements"][0]["layout"].is_null());
    EXPECT_EQ(r["placements"][2]["placement"], "never_reuse");
    EXPECT_TRUE(r["placements"][2]["layout"].is_null());
    EXPECT_FALSE(r["placements"][2]["outputs_change"].is_null());
    EXPECT_EQ(r["placements"][3]["placement"], "shuffled");
  }
  std::filesystem::remove_all(dir);
}

// An accumulator never zeroed: named at record time, and in cpreplay it is uninitialized_read
// (confirmed by poisoning) rather than a state_leak with an incidental polluter.
TEST(AllocationCli, ANeverWrittenAccumulatorIsAnUninitializedReadNotAStateLeak) {
  std::string dir = "/tmp/cprr-uninit-cli-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string db = dir + "/run.db";
  // healthy/all_reduce first, so the pooled world's device pool is dirty when the bug runs.
  const Cmd rec = run(std::string(CPRR_CPRECORD_PATH) + " --db " + db +
                      " --mode both --json --filter "
                      "'^healthy/all_reduce\\{count=1,dtype=i32\\}@2$|^(bug|fixed)/"
                      "uninitialized_read@2$'");
  ASSERT_FALSE(rec.out.empty());
  const auto doc = nlohmann::json::parse(rec.out);
  EXPECT_EQ(rec.code, 0);
  std::map<std::string, nlohmann::json> cases;
  for (const auto& c : doc["cases"]) cases[c["name"]] = c;
  ASSERT_EQ(cases.count("healthy/all_reduce"), 1u) << rec.out;
  const auto& bug = cases.at("bug/uninitialized_read");
  const auto& twin = cases.at("fixed/uninitialized_read");
  EXPECT_EQ(bug["verdict"], "uninitialized_read");
  ASSERT_FALSE(bug["uninitialized_read"].is_null());
  EXPECT_EQ(bug["uninitialized_read"]["buffer"], "grad_acc");
  EXPECT_EQ(bug["uninitialized_read"]["name"], "accumulate");
  EXPECT_TRUE(twin["uninitialized_read"].is_null());
  EXPECT_TRUE(twin["verdict"].is_null());

  const Cmd rep =
      run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db + " --json --case " + bug["id"].dump());
  const auto r = nlohmann::json::parse(rep.out);
  EXPECT_EQ(r["verdict"], "uninitialized_read");
  EXPECT_EQ(rep.code, 1);
  EXPECT_EQ(r["uninitialized_read"]["confirmed_by"], nlohmann::json::array({"poison"}));
  EXPECT_TRUE(r["polluters"].empty()) << "the dirty pool is the carrier, not a polluter";
  const Cmd clean =
      run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db + " --json --case " + twin["id"].dump());
  EXPECT_EQ(nlohmann::json::parse(clean.out)["verdict"], "reproduced");
  std::filesystem::remove_all(dir);
}

// A rank that all-reduces a shorter shard: Gloo aborts that rank, so no rank of the bug reports a
// result, yet the flight records name the collective, the ranks and both sizes, at record time
// and in cpreplay; the twin passes clean.
TEST(AllocationCli, ACollectiveCalledWithDifferentSizesIsNamedThoughTheBackendAborts) {
  std::string dir = "/tmp/cprr-coll-cli-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string db = dir + "/run.db";
  const Cmd rec = run(std::string(CPRR_CPRECORD_PATH) + " --db " + db +
                      " --mode both --json --filter '^(bug|fixed)/collective_size_mismatch@2$'");
  ASSERT_FALSE(rec.out.empty());
  const auto doc = nlohmann::json::parse(rec.out);
  EXPECT_EQ(rec.code, 0) << "a seeded mismatch, found: " << rec.out;
  std::map<std::string, nlohmann::json> cases;
  for (const auto& c : doc["cases"]) cases[c["name"]] = c;
  const auto& bug = cases.at("bug/collective_size_mismatch");
  const auto& twin = cases.at("fixed/collective_size_mismatch");
  EXPECT_EQ(bug["verdict"], "collective_mismatch");
  const auto& m = bug["collective_mismatch"];
  ASSERT_FALSE(m.is_null());
  EXPECT_EQ(m["seq"], 0);
  EXPECT_EQ(m["kind"], "all_reduce");
  EXPECT_EQ(m["field"], "bytes");
  EXPECT_EQ(m["ranks"], nlohmann::json::array({0, 1}));
  // 513 tokens of 64 floats: rank 0 owns 257 rows, rank 1 the other 256.
  EXPECT_EQ(m["values"], nlohmann::json::array({"65792", "65536"}));
  for (const auto& e : bug["executions"]) {
    EXPECT_NE(e["status"], "pass") << "the backend never finishes a mismatched all-reduce";
    EXPECT_NE(e["summary"].get<std::string>().find("the ranks called a collective differently"),
              std::string::npos)
        << e["summary"];
  }
  EXPECT_TRUE(twin["collective_mismatch"].is_null());
  EXPECT_TRUE(twin["verdict"].is_null());
  EXPECT_TRUE(twin["as_expected"].get<bool>());

  const Cmd rep =
      run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db + " --json --case " + bug["id"].dump());
  const auto r = nlohmann::json::parse(rep.out);
  EXPECT_EQ(r["verdict"], "collective_mismatch");
  EXPECT_EQ(rep.code, 1);
  EXPECT_EQ(r["collective_mismatch"]["values"], m["values"]);
  const Cmd clean =
      run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db + " --json --case " + twin["id"].dump());
  EXPECT_EQ(nlohmann::json::parse(clean.out)["verdict"], "reproduced");
  EXPECT_EQ(clean.code, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cprr

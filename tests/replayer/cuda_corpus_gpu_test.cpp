// The whole corpus on the cuda backend, end to end through the two CLIs, at W=2 and W=4: every
// case meets its expectation fresh and pooled (crash and hang fixtures included, and the cases
// after them pass), the seeded state leaks are flagged and their twins are not, cpreplay names
// the polluters as it does on the CPU backend, and every seeded stream race is named at record
// time and confirmed by a replay. With fewer GPUs than ranks the ranks share them (rank r on GPU
// r mod G) and the collectives go through Gloo staged through host memory: the same expectations
// hold, and every execution records that transport and its rank-to-GPU map. Skips without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "runtime/backend.h"
#include "tests/cli/cli_run.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;

using test::Cmd;
using test::run;

class CudaCorpus : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    std::string why;
    gpus_ = visible_gpus(&why);
    if (gpus_ < 1) GTEST_SKIP() << "no GPU: " << why;
    dir_ = "/tmp/cprr-gpu-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  int gpus_ = 0;
};

// A race candidate (accesses of unknown direction, corpus/opaque_calls.cpp) is no race of the
// record: cpreplay's probe decides it, and finds its pair (the call that really writes, and its
// reader).
bool is_candidate(const nlohmann::json& c) {
  return c["race"].is_object() && c["race"].value("candidate", false);
}

TEST_P(CudaCorpus, RecordBothMeetsEveryExpectationAndReplayNamesThePolluters) {
  const int w = GetParam();
  const std::string at = "@" + std::to_string(w);
  const std::string db = dir_ + "/run.db";
  const Cmd rec = run(std::string(CPRR_CPRECORD_PATH) + " --backend cuda --mode both --json --db " +
                      db + " --filter '" + at + "$'");
  ASSERT_FALSE(rec.out.empty()) << "cprecord printed nothing (exit " << rec.code << ")";
  const auto doc = nlohmann::json::parse(rec.out);
  EXPECT_EQ(doc["backend"], "cuda");
  std::map<std::string, int64_t> ids;
  std::set<std::string> flagged, unexpected, races, seeded_races;
  for (const auto& c : doc["cases"]) {
    const std::string label = c["label"];
    ids[label] = c["id"];
    const bool seeded_race = c["seeded_bug"] == "stream_race";
    // Only the state leaks are pinned: whether a race, an uninitialized read or a misplaced
    // symmetric buffer changes the outputs between modes depends on timing and on what the
    // memory held.
    const bool pinned = c["seeded_bug"] == "" || c["seeded_bug"] == "state_leak";
    if (!c["fresh_vs_pool"].is_null() && pinned) flagged.insert(label);
    if (!c["race"].is_null() && !is_candidate(c)) races.insert(label);
    if (seeded_race && !is_candidate(c)) seeded_races.insert(label);
    if (!c["as_expected"].get<bool>()) unexpected.insert(label + ": " + c["status"].dump());
  }
  EXPECT_EQ(rec.code, 0);
  EXPECT_TRUE(unexpected.empty()) << ::testing::PrintToString(unexpected);
  EXPECT_EQ(flagged, (std::set<std::string>{"bug/global_rng{n=4096}" + at,
                                            "bug/config_mutation{format=bshd}" + at}));
  // stream_races.cpp's four, and messages.cpp's send buffer rewritten (W=2) or groups.cpp's
  // (W=4).
  EXPECT_EQ(seeded_races.size(), 5u);
  EXPECT_EQ(races, seeded_races) << "a race in every seeded race case and nowhere else";
  ASSERT_GT(ids.count("bug/skip_collective" + at), 0u);

  // Seed 002 on real NCCL windows: every rank's symmetric pool is a registered window, the
  // layout check names the bug, and (NCCL 2.28 picks its load/store symmetric kernel for 2 MiB
  // of f32, which reads peers at this rank's offset) the sums are wrong where the twin's are right.
  std::map<std::string, nlohmann::json> by_label;
  for (const auto& c : doc["cases"]) by_label[c["label"]] = c;
  // Ranks sharing a GPU map each other's pools through CUDA IPC and the staged all-reduce reads
  // peers at this rank's offset, as NCCL's symmetric kernels do.
  const bool shared = gpus_ < w;
  std::string gpu_map;
  for (int r = 0; r < w; ++r) gpu_map += (r == 0 ? "" : ",") + std::to_string(r % gpus_);
  for (const auto& c : doc["cases"]) {
    for (const auto& e : c["executions"]) {
      if (e["world"] == 0) continue;  // no world ran it
      EXPECT_EQ(e["collectives"], shared ? "gloo_staged" : "nccl") << c["label"];
      EXPECT_EQ(e["rank_gpus"], gpu_map) << c["label"];
    }
  }
  const auto& sym_bug = by_label.at("bug/symmetric_address_order" + at);
  const auto& sym_twin = by_label.at("fixed/symmetric_address_order" + at);
  EXPECT_EQ(sym_bug["verdict"], "allocator_order");
  for (const auto* c : {&sym_bug, &sym_twin}) {
    for (const auto& e : (*c)["executions"]) {
      const std::string pool = e["symmetric_pool"];
      EXPECT_NE(pool.find(shared ? "peers mapped" : "NCCL window"), std::string::npos) << pool;
    }
  }
  const auto acc_hash = [](const nlohmann::json& c) {
    return c["executions"][0]["ranks"][0]["outputs"][0]["hash"].get<std::string>();
  };
  EXPECT_NE(acc_hash(sym_bug), acc_hash(sym_twin)) << "NCCL's symmetric kernel read the right "
                                                      "slots: was it a symmetric kernel at all?";
  // A collective called with different sizes hangs NCCL; the flight records still name it.
  const auto& mismatch = by_label.at("bug/collective_size_mismatch" + at);
  EXPECT_EQ(mismatch["verdict"], "collective_mismatch");
  EXPECT_EQ(mismatch["collective_mismatch"]["field"], "bytes");

  const std::pair<const char*, const char*> victims[] = {
      {"bug/global_rng{n=4096}", "bug/global_rng{n=256}"},
      {"bug/config_mutation{format=bshd}", "bug/config_mutation{format=thd}"}};
  for (const auto& [victim, polluter] : victims) {
    const Cmd rep = run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db + " --case " +
                        std::to_string(ids.at(victim + at)) + " --json");
    ASSERT_FALSE(rep.out.empty()) << victim;
    const auto r = nlohmann::json::parse(rep.out);
    EXPECT_EQ(rep.code, 1) << victim;
    EXPECT_EQ(r["verdict"], "state_leak") << victim;
    EXPECT_EQ(r["polluters"], nlohmann::json::array({ids.at(polluter + at)})) << victim;
  }
  // Every seeded race: cpreplay names the pair the record named and confirms it dynamically
  // (the spin kernel's delays, the CUDA one-sided window for the cross-rank one).
  for (const auto& c : doc["cases"]) {
    if (c["seeded_bug"] != "stream_race") continue;
    const std::string label = c["label"];
    const Cmd race = run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db + " --case " +
                         c["id"].dump() + " --json");
    ASSERT_FALSE(race.out.empty()) << label;
    const auto rr = nlohmann::json::parse(race.out);
    EXPECT_EQ(rr["verdict"], "stream_race") << label;
    // The pair the record named (a candidate's is the probe's to find).
    if (!is_candidate(c)) {
      EXPECT_EQ(rr["race"]["first"], c["race"]["first"]) << label;
      EXPECT_EQ(rr["race"]["second"], c["race"]["second"]) << label;
    }
    EXPECT_FALSE(rr["race"]["confirmed_by"].empty()) << label << "\n" << rr["log"].dump(1);
    EXPECT_LE(rr["replays"].get<int>(), 20) << label;
  }
  const Cmd healthy = run(std::string(CPRR_CPREPLAY_PATH) + " --db " + db + " --case " +
                          std::to_string(ids.at("healthy/cp_ring{block=65536}" + at)) + " --json");
  EXPECT_EQ(healthy.code, 0) << healthy.out;
  EXPECT_EQ(nlohmann::json::parse(healthy.out)["verdict"], "reproduced") << healthy.out;
}

INSTANTIATE_TEST_SUITE_P(W, CudaCorpus, ::testing::Values(2, 4),
                         [](const auto& info) { return "W" + std::to_string(info.param); });

}  // namespace
}  // namespace cprr

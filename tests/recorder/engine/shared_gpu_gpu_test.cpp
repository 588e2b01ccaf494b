// Ranks sharing a GPU: a world of more ranks than visible GPUs runs with rank r on GPU r mod G and
// its collectives through Gloo staged through host memory, records that, gives the same results
// as the cpu backend (Gloo sums in the same order), and refuses --collectives nccl by name. The
// ranks see one GPU (CUDA_VISIBLE_DEVICES=0 in their environment), so this runs on any GPU
// machine. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "runtime/backend.h"
#include "tests/recorder/scoped_env.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

CaseInstance corpus_case(const std::string& label) {
  for (const CaseInstance& i : expand(fetch_catalog(CPRR_WORKER_PATH), {})) {
    if (i.label() == label) return i;
  }
  ADD_FAILURE() << "no corpus case " << label;
  return {};
}

ControllerConfig config(BackendKind backend,
                        CollectivesRequest collectives = CollectivesRequest::automatic) {
  ControllerConfig c;
  c.worker = CPRR_WORKER_PATH;
  c.backend = backend;
  c.run.collectives = collectives;
  if (backend == BackendKind::cuda) c.env = {{"CUDA_VISIBLE_DEVICES", "0"}};
  c.run.timeout_override_s = 60;
  return c;
}

std::vector<uint64_t> output_hashes(const ExecutionResult& r) {
  std::vector<uint64_t> out;
  for (const RankReport& k : r.ranks) {
    if (!k.done) continue;
    for (const Capture& c : k.done->capture.outputs) out.push_back(c.digest.whole);
  }
  return out;
}

class SharedGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (visible_gpus(&why) < 1) GTEST_SKIP() << "no GPU: " << why;
  }
};

// Every collective kind, fresh and pooled, on four ranks of one GPU: staged Gloo, the map
// recorded, and the outputs bit for bit the cpu backend's (integer and float alike: Gloo's ring
// reduces in the same order on both).
TEST_F(SharedGpu, FourRanksOnOneGpuRunStagedAndMatchTheCpuBackend) {
  for (const char* label : {"healthy/all_reduce{count=65539,dtype=f32}@4",
                            "healthy/all_gather{count=4099}@4", "healthy/all_to_all_v{unit=1000}@4",
                            "healthy/broadcast@4", "healthy/cp_ring{block=65536}@4"}) {
    const CaseInstance inst = corpus_case(label);
    Controller cpu(config(BackendKind::cpu));
    const ExecutionResult want = cpu.run(inst, Mode::fresh);
    ASSERT_EQ(want.status, ExecStatus::pass) << label << ": " << want.summary;
    Controller cuda(config(BackendKind::cuda));
    for (Mode mode : {Mode::fresh, Mode::pool}) {
      const ExecutionResult got = cuda.run(inst, mode);
      ASSERT_EQ(got.status, ExecStatus::pass) << label << ": " << got.summary;
      EXPECT_EQ(got.collectives, "gloo_staged") << label;
      EXPECT_EQ(got.rank_gpus, "0,0,0,0") << label;
      EXPECT_EQ(output_hashes(got), output_hashes(want)) << label << " " << mode_name(mode);
    }
  }
}

// NCCL would fail its init with "Duplicate GPU detected": the controller refuses first, naming
// the ranks, the GPU and what to pass instead.
TEST_F(SharedGpu, NcclWhereRanksShareAGpuIsRefusedNamingThem) {
  Controller c(config(BackendKind::cuda, CollectivesRequest::nccl));
  const ExecutionResult r = c.run(corpus_case("healthy/noop@2"), Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::error);
  EXPECT_THAT(r.summary, HasSubstr("ranks 0 and 1 share GPU 0"));
  EXPECT_THAT(r.summary, HasSubstr("--collectives auto"));
}

// The symmetric pool is mapped through CUDA IPC and put/signal/wait reach the peers on one GPU.
TEST_F(SharedGpu, TheSymmetricPoolIsMappedThroughIpcOnOneGpu) {
  Controller c(config(BackendKind::cuda));
  const ExecutionResult r = c.run(corpus_case("fixed/symmetric_address_order@2"), Mode::fresh);
  ASSERT_EQ(r.status, ExecStatus::pass) << r.summary;
  EXPECT_THAT(r.symmetric_pool, HasSubstr("peers mapped"));
  EXPECT_THAT(r.symmetric_pool, Not(HasSubstr("peers not mapped")));
}

// Ranks sharing a GPU compete for what is left of it: when only one rank's device arena fits,
// every rank fails the case at once with an error (they agree through Gloo, as through NCCL),
// instead of the others waiting in the first collective until the deadline.
TEST_F(SharedGpu, AnArenaThatFitsForOneRankOnlyIsTheCasesErrorOnEveryRank) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  std::size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  // 8 GiB left: two contexts and symmetric arenas (~2 GiB) leave room for one 4 GiB arena.
  constexpr std::size_t kLeft = std::size_t{8} << 30;
  ASSERT_GT(free, kLeft + (std::size_t{1} << 30));
  void* hog = nullptr;
  ASSERT_EQ(cudaMalloc(&hog, free - kLeft), cudaSuccess);
  {
    const test::ScopedEnv arena("CPRR_CUDA_DEVICE_MIB", "4096");
    ControllerConfig cc = config(BackendKind::cuda);
    cc.run.timeout_override_s = 30;  // a hang, if it comes, ends here
    Controller c(cc);
    const ExecutionResult r =
        c.run(corpus_case("healthy/all_reduce{count=1,dtype=f32}@2"), Mode::fresh);
    EXPECT_EQ(r.status, ExecStatus::error) << r.summary;
    ASSERT_EQ(r.ranks.size(), 2u);
    int failed = 0, told = 0;
    for (const RankReport& k : r.ranks) {
      ASSERT_TRUE(k.done.has_value()) << "a rank did not report: " << r.summary;
      EXPECT_EQ(k.done->outcome, RankOutcome::error);
      const std::string& e = k.done->error;
      failed += e.find("cannot allocate the 4096 MiB device arena on GPU 0") != std::string::npos;
      told +=
          e.find("of this world cannot allocate its 4096 MiB device arena") != std::string::npos;
    }
    EXPECT_EQ(failed, 1) << "one rank's arena fits: " << r.summary;
    EXPECT_EQ(told, 1) << "the other rank is told: " << r.summary;
  }
  EXPECT_EQ(cudaFree(hog), cudaSuccess);
}

// With two GPUs, --collectives gloo stages a world that NCCL could carry, and auto is NCCL.
TEST_F(SharedGpu, GlooIsForcedOnAGpuPerRank) {
  if (visible_gpus() < 2) {
    GTEST_SKIP() << "needs 2 GPUs: with one, every W=2 world shares it (the other tests)";
  }
  const CaseInstance inst = corpus_case("healthy/all_reduce{count=1000,dtype=i64}@2");
  for (const auto& [collectives, transport] : {std::pair{CollectivesRequest::gloo, "gloo_staged"},
                                               std::pair{CollectivesRequest::automatic, "nccl"}}) {
    ControllerConfig cc = config(BackendKind::cuda, collectives);
    cc.env.clear();  // every GPU visible
    Controller c(cc);
    const ExecutionResult r = c.run(inst, Mode::fresh);
    ASSERT_EQ(r.status, ExecStatus::pass) << r.summary;
    EXPECT_EQ(r.collectives, transport);
    EXPECT_EQ(r.rank_gpus, "0,1");
  }
}

}  // namespace
}  // namespace cprr

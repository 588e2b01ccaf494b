// What worlds hold on the GPU: a world allocates its device arena when its first case arrives,
// not when it starts, so worlds standing by for later cases (--standby) hold their CUDA context
// and communicator but no arena; an arena that does not fit is the case's error on every rank
// at once; and a world gives everything back once it is shut down, though its ranks exit
// without tearing NCCL and CUDA down. Skips without a GPU (the two-rank test without two).
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

using test::ScopedEnv;
using ::testing::HasSubstr;

// The one instance of `label` in the corpus, as a case of `world_size` ranks.
CaseInstance corpus_case_at(const std::string& label_regex, int world_size) {
  std::vector<CaseInstance> plan = expand(fetch_catalog(CPRR_WORKER_PATH), std::regex(label_regex));
  EXPECT_EQ(plan.size(), 1u) << label_regex;
  CaseInstance one = plan.at(0);
  one.world_size = world_size;
  return one;
}

// healthy/noop as a one-rank case: a world of one GPU.
CaseInstance one_rank_noop() { return corpus_case_at("^healthy/noop@2$", 1); }

ControllerConfig standby_config(int standby) {
  ControllerConfig c;
  c.worker = CPRR_WORKER_PATH;
  c.backend = BackendKind::cuda;
  c.run.standby = standby;
  // One world at a time besides the standby ones: the one that ran is shut down before the next
  // run returns, so what the GPU must hold at once is known.
  c.retire_in_background = false;
  return c;
}

std::size_t free_gpu_bytes() {
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

class WorldMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (visible_gpus(&why) < 1) GTEST_SKIP() << "no GPU: " << why;
  }
};

// Once run() has shut a fresh world down (retiring off) and close_pools() the pooled one, their
// GPU memory is free again: their ranks exit without tearing NCCL and CUDA down
// (CudaBackend::teardown_left_to_exit), and nothing of them may outlive the call.
TEST_F(WorldMemory, AWorldShutDownGivesItsGpuMemoryBack) {
  const std::size_t before = free_gpu_bytes();
  {
    Controller c(standby_config(0));
    const CaseInstance noop = one_rank_noop();
    for (int i = 0; i < 3; ++i) {
      const ExecutionResult r = c.run(noop, Mode::fresh);
      EXPECT_EQ(r.status, ExecStatus::pass) << r.summary;
    }
    EXPECT_EQ(c.run(noop, Mode::pool).status, ExecStatus::pass);
    EXPECT_EQ(c.run(noop, Mode::pool).status, ExecStatus::pass);
    c.close_pools();
  }
  // Each world held an 8 GiB device arena and a 512 MiB symmetric one: 64 MiB of slack is none
  // of it.
  EXPECT_GE(free_gpu_bytes() + (std::size_t{64} << 20), before);
}

// With arenas of 40% of the free memory, two arenas do not fit at once: four worlds standing by
// with an arena each could not start, and their cases would be errors.
TEST_F(WorldMemory, WorldsStandingByHoldNoDeviceArena) {
  const ScopedEnv arena("CPRR_CUDA_DEVICE_MIB", std::to_string((free_gpu_bytes() >> 20) * 2 / 5));
  const CaseInstance noop = one_rank_noop();
  Controller c(standby_config(4));
  int started_ahead = 0;
  for (int i = 0; i < 6; ++i) {
    c.foresee(std::vector<int>(6 - i, 1), true);
    const ExecutionResult r = c.run(noop, Mode::fresh);
    EXPECT_EQ(r.status, ExecStatus::pass) << "case " << i << ": " << r.summary;
    // wall_ms holds only what was left of the world's start when the case took it: less than
    // the whole start means the world stood by (ExecutionResult::startup_ms).
    if (r.wall_ms < r.startup_ms) ++started_ahead;
  }
  EXPECT_GT(started_ahead, 0) << "no case took a world that stood by: nothing was tested";
  c.close_pools();
}

// A world whose arena does not fit starts; its case is an error (not a failure of the case)
// that names the arena, the GPU and what to lower.
TEST_F(WorldMemory, ADeviceArenaThatDoesNotFitIsTheCasesErrorAndSaysWhatToLower) {
  const ScopedEnv arena("CPRR_CUDA_DEVICE_MIB", "100000000");  // 95 TiB: no GPU has it free
  Controller c(standby_config(0));
  const ExecutionResult r = c.run(one_rank_noop(), Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::error);
  EXPECT_THAT(r.summary, HasSubstr("cannot allocate the 100000000 MiB device arena on GPU 0"));
  EXPECT_THAT(r.summary, HasSubstr("lower --standby"));
  EXPECT_THAT(r.summary, HasSubstr("CPRR_CUDA_DEVICE_MIB"));
}

// Rank 0's arena does not fit (this process holds most of GPU 0), rank 1's does: the case is
// rank 0's error, and rank 1, waiting in the all-reduce rank 0 never entered, is released at
// once, not at the deadline (an NCCL world does not agree on its arenas: that would wait for
// the communicator, which joins while the case runs).
TEST_F(WorldMemory, AnArenaThatFitsOnOneRankOnlyIsTheCasesErrorAndItsPeerIsReleased) {
  std::string why;
  if (visible_gpus(&why) < 2)
    GTEST_SKIP() << "needs 2 GPUs: it fills GPU 0 so that rank 1's arena fits on GPU 1 "
                    "(SharedGpu has the same check with ranks on one GPU)";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  constexpr std::size_t kLeft = std::size_t{6} << 30;  // a context, NCCL, the symmetric arena
  const std::size_t free0 = free_gpu_bytes();
  ASSERT_GT(free0, kLeft + (std::size_t{1} << 30));
  void* hog = nullptr;
  ASSERT_EQ(cudaMalloc(&hog, free0 - kLeft), cudaSuccess);
  {
    const ScopedEnv arena("CPRR_CUDA_DEVICE_MIB", "16384");  // fits on GPU 1 only
    ControllerConfig cc = standby_config(0);
    cc.run.timeout_override_s = 30;  // a hang, if it comes, ends here
    Controller c(cc);
    const ExecutionResult r =
        c.run(corpus_case_at("^healthy/all_reduce\\{count=1,dtype=f32\\}@2$", 2), Mode::fresh);
    EXPECT_EQ(r.status, ExecStatus::error) << r.summary;
    EXPECT_THAT(r.summary, HasSubstr("cannot allocate the 16384 MiB device arena on GPU 0"));
    EXPECT_THAT(r.note, HasSubstr("after rank 0 failed"));
  }
  EXPECT_EQ(cudaFree(hog), cudaSuccess);
}

}  // namespace
}  // namespace cprr

// What worlds hold on the GPU: a world allocates its device arena when its first case arrives,
// not when it starts, so worlds standing by for later cases (--standby) hold their CUDA context
// and communicator but no arena; and a world that was shut down gives everything back, though
// its ranks exit without tearing NCCL and CUDA down. One GPU; skips without one.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "runtime/backend.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;

// healthy/noop as a one-rank case: a world of one GPU.
CaseInstance one_rank_noop() {
  std::vector<CaseInstance> plan =
      expand(fetch_catalog(CPRR_WORKER_PATH), std::regex("^healthy/noop@2$"));
  EXPECT_EQ(plan.size(), 1u);
  CaseInstance one = plan.at(0);
  one.world_size = 1;
  return one;
}

ControllerConfig cuda_config(int standby) {
  ControllerConfig c;
  c.worker = CPRR_WORKER_PATH;
  c.backend = "cuda";
  c.standby = standby;
  // One world at a time besides the standby ones: the one that ran is shut down before the next
  // run returns, so what the GPU must hold at once is known.
  c.retire_in_background = false;
  return c;
}

// Sets an environment variable the ranks inherit, for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

class WorldMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (visible_gpus(&why) < 1) GTEST_SKIP() << "no GPU: " << why;
  }
};

std::size_t free_gpu_bytes() {
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

// The ranks of a world told to shut down exit at once (CudaBackend::teardown_left_to_exit): what
// they held must come back all the same, from fresh worlds and from a pooled one.
TEST_F(WorldMemory, AWorldShutDownGivesItsGpuMemoryBack) {
  const std::size_t before = free_gpu_bytes();
  {
    Controller c(cuda_config(0));
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
  Controller c(cuda_config(4));
  for (int i = 0; i < 6; ++i) {
    c.foresee(std::vector<int>(6 - i, 1), true);
    const ExecutionResult r = c.run(noop, Mode::fresh);
    EXPECT_EQ(r.status, ExecStatus::pass) << "case " << i << ": " << r.summary;
  }
  c.close_pools();
}

// A world whose arena does not fit starts; its case is an error (not a failure of the case)
// that names the arena, the GPU and what to lower.
TEST_F(WorldMemory, ADeviceArenaThatDoesNotFitIsTheCasesErrorAndSaysWhatToLower) {
  const ScopedEnv arena("CPRR_CUDA_DEVICE_MIB", "100000000");  // 95 TiB: no GPU has it free
  Controller c(cuda_config(0));
  const ExecutionResult r = c.run(one_rank_noop(), Mode::fresh);
  EXPECT_EQ(r.status, ExecStatus::error);
  EXPECT_THAT(r.summary, HasSubstr("cannot allocate the 100000000 MiB device arena on GPU 0"));
  EXPECT_THAT(r.summary, HasSubstr("lower --standby"));
  EXPECT_THAT(r.summary, HasSubstr("CPRR_CUDA_DEVICE_MIB"));
}

}  // namespace
}  // namespace cprr

// cprecord --jobs' slots: the machine split so that worlds side by side share no core or GPU.
#include "recorder/engine/job_slots.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "runtime/error.h"

namespace cprr {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

Machine machine(int cpus, int gpus, BackendKind backend) {
  Machine m;
  m.backend = backend;
  for (int c = 0; c < cpus; ++c) m.cpus.push_back(c);
  for (int g = 0; g < gpus; ++g) m.gpus.push_back("GPU-" + std::to_string(g));
  return m;
}

TEST(JobSlots, CoresAndGpusSplitIntoDisjointSlotsThatTogetherAreTheMachine) {
  const std::vector<JobSlot> cpu = job_slots(machine(7, 0, BackendKind::cpu), 3);
  ASSERT_EQ(cpu.size(), 3u);
  EXPECT_THAT(cpu[0].cpus, ElementsAre(0, 1, 2));
  EXPECT_THAT(cpu[1].cpus, ElementsAre(3, 4));
  EXPECT_THAT(cpu[2].cpus, ElementsAre(5, 6));
  EXPECT_EQ(devices_text(cpu[0], BackendKind::cpu), "cpus 0-2");
  const std::vector<JobSlot> cuda = job_slots(machine(16, 4, BackendKind::cuda), 2);
  EXPECT_THAT(cuda[0].gpus, ElementsAre("GPU-0", "GPU-1"));
  EXPECT_THAT(cuda[1].gpus, ElementsAre("GPU-2", "GPU-3"));
  EXPECT_THAT(cuda[1].cpus, ElementsAre(8, 9, 10, 11, 12, 13, 14, 15));
  EXPECT_EQ(devices_text(cuda[1], BackendKind::cuda), "gpus GPU-2,GPU-3");
  // One job is today's run: everything, nothing placed.
  const std::vector<JobSlot> one = job_slots(machine(4, 2, BackendKind::cuda), 1);
  EXPECT_EQ(one[0].cpus.size(), 4u);
  EXPECT_EQ(one[0].gpus.size(), 2u);
}

TEST(JobSlots, MoreJobsThanCoresShareCoresInTurnButNeverAGpu) {
  const std::vector<JobSlot> cpu = job_slots(machine(2, 0, BackendKind::cpu), 3);
  EXPECT_THAT(cpu[2].cpus, ElementsAre(0));
  try {
    job_slots(machine(16, 1, BackendKind::cuda), 2);
    ADD_FAILURE() << "two jobs on one GPU";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("never share a GPU"));
  }
}

TEST(JobSlots, TheDefaultIsAsManyWorldsOfTheLargestSizeAsTheMachineHolds) {
  EXPECT_EQ(default_jobs(machine(2, 0, BackendKind::cpu), 2), 1);
  EXPECT_EQ(default_jobs(machine(2, 0, BackendKind::cpu), 4), 1) << "at least one";
  EXPECT_EQ(default_jobs(machine(16, 0, BackendKind::cpu), 4), 4);
  EXPECT_EQ(default_jobs(machine(128, 0, BackendKind::cpu), 2), kMaxDefaultJobs);
  EXPECT_EQ(default_jobs(machine(16, 8, BackendKind::cuda), 2), 4);
  EXPECT_EQ(default_jobs(machine(16, 1, BackendKind::cuda), 2), 1);
}

TEST(JobSlots, ACudaJobSeesItsGpusAlone) {
  const std::vector<JobSlot> slots = job_slots(machine(4, 2, BackendKind::cuda), 2);
  EXPECT_THAT(job_env(slots[0], BackendKind::cuda),
              ElementsAre(Pair("CUDA_VISIBLE_DEVICES", "GPU-0")));
  EXPECT_THAT(job_env(slots[1], BackendKind::cuda),
              ElementsAre(Pair("CUDA_VISIBLE_DEVICES", "GPU-1")));
  EXPECT_TRUE(job_env(slots[0], BackendKind::cpu).empty())
      << "cpu jobs are placed by pinning alone";
}

TEST(JobSlots, APinnedThreadsProcessesAndThreadsKeepItsCores) {
  const Machine m = this_machine(BackendKind::cpu);
  ASSERT_FALSE(m.cpus.empty());
  std::thread([&] {
    pin_this_thread({m.cpus.back()});
    std::thread([&] {  // a thread it starts inherits the mask
      cpu_set_t set;
      CPU_ZERO(&set);
      ASSERT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
      EXPECT_EQ(CPU_COUNT(&set), 1);
      EXPECT_TRUE(CPU_ISSET(m.cpus.back(), &set));
    })
        .join();
  }).join();
  EXPECT_EQ(this_machine(BackendKind::cpu).cpus, m.cpus) << "the main thread is not pinned";
}

TEST(JobSlots, TheRecordedDevicesReadBackAsTheCoresOrGpusTheyName) {
  EXPECT_EQ(cpus_of("cpus 0-2,5"), (std::vector<int>{0, 1, 2, 5}));
  EXPECT_EQ(cpus_of(devices_text(JobSlot{{3, 4, 7}, {}}, BackendKind::cpu)),
            (std::vector<int>{3, 4, 7}));
  for (const char* bad : {"", "cpus ", "cpus 3-1", "cpus a", "cpus 1,", "gpus 0", "cpus -1"}) {
    EXPECT_FALSE(cpus_of(bad).has_value()) << bad;
  }
  EXPECT_EQ(gpus_of("gpus GPU-a,GPU-b"), "GPU-a,GPU-b");
  EXPECT_FALSE(gpus_of("cpus 0").has_value());
  EXPECT_FALSE(gpus_of("gpus ").has_value());
}

TEST(JobSlots, AScopedPinGivesTheThreadItsCoresBack) {
  const std::vector<int> all = this_machine(BackendKind::cpu).cpus;
  std::thread([&] {
    {
      const ScopedPin pin({all.front()});
      EXPECT_EQ(this_machine(BackendKind::cpu).cpus, std::vector<int>{all.front()});
    }
    EXPECT_EQ(this_machine(BackendKind::cpu).cpus, all);
  }).join();
}

}  // namespace
}  // namespace cprr

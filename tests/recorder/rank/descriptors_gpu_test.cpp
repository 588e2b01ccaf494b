// Descriptors on the cuda backend: whatever CUDA and NCCL opened during a case
// (NCCL opens its sockets at the collective that first needs one) is close-on-exec before the
// next case, so a program a case execs holds none of the rank's sockets. One rank alone (NCCL)
// and two ranks (NCCL with two GPUs, Gloo staged on one); each first execution prints what its
// all_reduce left inheritable. Skips without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "runtime/backend.h"
#include "tests/recorder/engine/engine_support.h"

namespace cprr {
namespace {

TEST(DescriptorsGpu, WhatACollectiveOpenedIsNotInheritedByALaterExec) {
  std::string why;
  if (visible_gpus(&why) < 1) GTEST_SKIP() << "no GPU: " << why;
  ControllerConfig config;
  config.worker = CPRR_FIXTURE_WORKER_PATH;
  config.backend = BackendKind::cuda;
  Controller c(config);
  for (const char* label : {"test/inheritable_descriptors{all_reduce=1}@1",
                            "test/inheritable_descriptors{all_reduce=1}@2"}) {
    const CaseInstance inst = engine_test::inst(engine_test::kFixture, label);
    for (int round = 0; round < 2; ++round) {
      const ExecutionResult r = c.run(inst, Mode::pool);
      EXPECT_EQ(r.status, ExecStatus::pass) << label << " round " << round << ": " << r.summary;
      for (const RankReport& rank : r.ranks) {
        std::cout << label << " round " << round << " (" << r.collectives
                  << "): " << rank.stderr_tail;
      }
    }
  }
}

}  // namespace
}  // namespace cprr

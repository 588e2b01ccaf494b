// The live collective check on the cuda backend: ranks stuck in a collective
// they called differently are stopped at once and named, and a rank that enters the same
// collective late is left alone. The ranks see one GPU (CUDA_VISIBLE_DEVICES=0) and share it, so
// this runs on any GPU machine. Skips without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "runtime/backend.h"
#include "tests/recorder/engine/engine_support.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;

ControllerConfig cuda_config() {
  ControllerConfig c;
  c.worker = CPRR_FIXTURE_WORKER_PATH;
  c.backend = BackendKind::cuda;
  c.env = {{"CUDA_VISIBLE_DEVICES", "0"}};
  return c;
}

class LiveMismatchGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (visible_gpus(&why) < 1) GTEST_SKIP() << "no GPU: " << why;
  }
};

TEST_F(LiveMismatchGpu, RanksStuckInACollectiveTheyCalledDifferentlyAreStoppedAndNamed) {
  Controller c(cuda_config());
  for (const char* label : {"test/blocking_mismatch{ms=50}@2", "test/blocking_mismatch{ms=50}@3"}) {
    const CaseInstance inst = engine_test::inst(engine_test::kFixture, label);
    for (Mode mode : {Mode::pool, Mode::fresh}) {
      const ExecutionResult r = c.run(inst, mode);
      EXPECT_EQ(r.status, ExecStatus::hang) << label << ": " << r.summary;
      EXPECT_THAT(r.note, HasSubstr("after the last rank entered collective #0")) << label;
      EXPECT_THAT(r.summary, HasSubstr("the ranks called a collective differently")) << label;
    }
  }
}

TEST_F(LiveMismatchGpu, ARankEnteringTheSameCollectiveLateIsNeverStopped) {
  Controller c(cuda_config());
  for (const char* label : {"test/slow_matching{ms=300}@2", "test/slow_matching{ms=300}@3"}) {
    for (Mode mode : {Mode::pool, Mode::fresh}) {
      const ExecutionResult r = c.run(engine_test::inst(engine_test::kFixture, label), mode);
      EXPECT_EQ(r.status, ExecStatus::pass) << label << ": " << r.summary;
      EXPECT_EQ(r.note.find("stopped"), std::string::npos) << label << ": " << r.note;
    }
  }
}

}  // namespace
}  // namespace cprr

// cpreplay --all's "fails only on": the executions that missed their expectation all ran in one
// place (cprecord --jobs records it) where none that met it ran: a bad device, said as such.
#include <gtest/gtest.h>

#include "replayer/replay_all.h"

namespace cprr {
namespace {

ExecutionResult ran_on(const std::string& devices, bool as_expected) {
  ExecutionResult r;
  r.devices = devices;
  r.as_expected = as_expected;
  return r;
}

std::string only_on(const std::vector<ExecutionResult>& runs) {
  Places p;
  for (const ExecutionResult& r : runs) p.add(r);
  return p.only_on();
}

TEST(TriagePlaces, FailuresOnOneDeviceWhereNothingPassedNameThatDevice) {
  EXPECT_EQ(only_on({ran_on("gpus GPU-a", true), ran_on("gpus GPU-b", false),
                     ran_on("gpus GPU-b", false), ran_on("gpus GPU-c", true)}),
            "gpus GPU-b");
}

TEST(TriagePlaces, AnythingElseNamesNoDevice) {
  EXPECT_EQ(only_on({ran_on("gpus GPU-a", true), ran_on("gpus GPU-b", false),
                     ran_on("gpus GPU-c", false)}),
            "")
      << "failures in two places";
  EXPECT_EQ(only_on({ran_on("gpus GPU-b", true), ran_on("gpus GPU-b", false)}), "")
      << "the same place passed too";
  EXPECT_EQ(only_on({ran_on("gpus GPU-b", false)}), "") << "nothing passed anywhere to compare";
  EXPECT_EQ(only_on({ran_on("", false), ran_on("", true)}), "") << "not placed (one job)";
  EXPECT_EQ(only_on({ran_on("cpus 0", true), ran_on("cpus 1", true)}), "") << "nothing failed";
}

}  // namespace
}  // namespace cprr

#pragma once
// Shared by the engine test files: case instances from the real worker binaries' catalogs, a
// controller configuration, and the checks every passing execution must meet.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"

namespace cprr::engine_test {

inline const std::string kWorker = CPRR_WORKER_PATH;
inline const std::string kFixture = CPRR_FIXTURE_WORKER_PATH;

/// The expanded catalog of `worker`, fetched once per test binary.
inline const std::vector<CaseInstance>& plan_of(const std::string& worker) {
  static std::map<std::string, std::vector<CaseInstance>> cache;
  auto it = cache.find(worker);
  if (it == cache.end()) it = cache.emplace(worker, expand(fetch_catalog(worker), {})).first;
  return it->second;
}

/// The instance with exactly this label (e.g. "healthy/noop@2"); fails the test if there is none.
inline CaseInstance inst(const std::string& worker, const std::string& label) {
  for (const CaseInstance& i : plan_of(worker)) {
    if (i.label() == label) return i;
  }
  ADD_FAILURE() << "no case instance " << label << " in " << worker;
  return {};
}

/// A fixture instance with its parameters replaced (the worker runs whatever RunCase carries).
inline CaseInstance with_params(CaseInstance i, Params params) {
  i.params = std::move(params);
  return i;
}

inline ControllerConfig config(const std::string& worker) {
  ControllerConfig c;
  c.worker = worker;
  return c;
}

/// Every rank reported a result for this execution (and not for some other one).
inline void expect_all_done_for_self(const ExecutionResult& r) {
  ASSERT_FALSE(r.ranks.empty()) << r.label;
  for (std::size_t k = 0; k < r.ranks.size(); ++k) {
    ASSERT_TRUE(r.ranks[k].done.has_value()) << r.label << " rank " << k << ": " << r.summary;
    EXPECT_EQ(r.ranks[k].done->execution, r.id) << r.label << " rank " << k;
    EXPECT_FALSE(r.ranks[k].exit.has_value()) << r.label << " rank " << k;
    EXPECT_TRUE(r.ranks[k].protocol_error.empty()) << r.ranks[k].protocol_error;
  }
}

inline void expect_pass(const ExecutionResult& r) {
  EXPECT_EQ(r.status, ExecStatus::pass) << r.label << ": " << r.summary;
  EXPECT_TRUE(r.as_expected) << r.label;
  EXPECT_TRUE(r.summary.empty()) << r.summary;
  expect_all_done_for_self(r);
}

/// Tests run at world sizes 2 and 4 (instantiated once, in engine_test.cpp, for every file).
class EngineByWorldSize : public ::testing::TestWithParam<int> {
 protected:
  int w() const { return GetParam(); }
  std::string at(const std::string& name) const { return name + "@" + std::to_string(w()); }
};

}  // namespace cprr::engine_test

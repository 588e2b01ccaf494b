#pragma once
// Shared by the engine test files: case instances from the real worker binaries' catalogs, a
// controller configuration, and the checks every passing execution must meet.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
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

/// Polls `done` until it holds, up to `limit` (long: a deadline, not a schedule); whether it held.
template <class F>
bool wait_until(F done, std::chrono::seconds limit = std::chrono::seconds(120)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // why: the wait's poll
  }
  return true;
}

/// A file one side of a test makes and the other waits for, never a time: test/sleep and
/// test/stall make CPRR_TEST_STARTED's as their body starts; test/die_after_done's rank 1 dies
/// when CPRR_TEST_DIE_WHEN's appears (tests/recorder/fixture). A path of this process's, not
/// there yet, removed at the end.
class SignalFile {
 public:
  explicit SignalFile(const std::string& name)
      : path_((std::filesystem::temp_directory_path() /
               ("cprr-signal-" + std::to_string(::getpid()) + "-" + name))
                  .string()) {
    std::filesystem::remove(path_);
  }
  ~SignalFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  SignalFile(const SignalFile&) = delete;
  SignalFile& operator=(const SignalFile&) = delete;
  const std::string& path() const { return path_; }
  void make() const { std::ofstream(path_).close(); }
  /// Waits until the file is there (wait_until).
  bool wait(std::chrono::seconds limit = std::chrono::seconds(120)) const {
    return wait_until([this] { return std::filesystem::exists(path_); }, limit);
  }

 private:
  std::string path_;
};

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

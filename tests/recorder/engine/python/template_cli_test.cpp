// cprecord --python with its ranks forked from a template process: nothing of it (the template,
// a rank) outlives cprecord, whether it ends by itself or is killed in the middle of a case.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "recorder/launch/process.h"
#include "runtime/fd.h"
#include "tests/recorder/engine/python/template_support.h"

namespace cprr {
namespace {

using namespace template_test;

const std::string kCprecord = CPRR_CPRECORD_PATH;

// cprecord --python `dir` in fresh mode on the cases `filter` matches, quiet.
ChildProcess cprecord(const fs::path& dir, const std::string& filter,
                      const std::vector<std::string>& more = {}) {
  static const UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnSpec spec;
  spec.argv = {kCprecord,
               "--python",
               dir.string(),
               "--backend",
               "cpu",
               "--mode",
               "fresh",
               "--filter",
               filter,
               "--db",
               (dir / "x.db").string()};
  spec.argv.insert(spec.argv.end(), more.begin(), more.end());
  spec.fds = {{devnull.get(), 0}, {devnull.get(), 1}, {devnull.get(), 2}};
  spec.env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
  return ChildProcess::spawn(spec);
}

// The processes of `dir`'s cases other than cprecord `self` (the template and its ranks: a
// forked rank keeps the template's command line, which holds the path).
std::vector<Proc> workers_of(const fs::path& dir, pid_t self) {
  std::vector<Proc> out;
  for (Proc& p : running_with(dir.string())) {
    if (p.pid != self) out.push_back(std::move(p));
  }
  return out;
}

std::string described(const std::vector<Proc>& left) {
  std::string out = std::to_string(left.size()) + " left";
  for (const Proc& p : left) out += "\n  pid " + std::to_string(p.pid) + ": " + p.cmdline;
  return out;
}

TEST(TemplateCli, NothingOutlivesCprecordThatEnded) {
  CaseDir dir("cases");
  ChildProcess run = cprecord(dir.path(), "tmpl/all_reduce");
  const auto& exit = run.wait(120000);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_TRUE(eventually([&] { return workers_of(dir.path(), run.pid()).empty(); }, 5000))
      << described(workers_of(dir.path(), run.pid()));
}

TEST(TemplateCli, NothingOutlivesCprecordKilledInTheMiddleOfACase) {
  CaseDir dir("cases");
  ChildProcess run = cprecord(dir.path(), "tmpl/hang", {"--timeout", "600"});
  // The template and the world's two ranks, one of them asleep in the case.
  ASSERT_TRUE(eventually([&] { return workers_of(dir.path(), run.pid()).size() >= 3; }, 120000));
  ASSERT_EQ(::kill(run.pid(), SIGKILL), 0);
  run.wait(10000);
  EXPECT_TRUE(eventually([&] { return workers_of(dir.path(), run.pid()).empty(); }, 5000))
      << described(workers_of(dir.path(), run.pid()));
}

}  // namespace
}  // namespace cprr

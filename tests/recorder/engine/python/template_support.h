#pragma once
// Shared by the template tests: a private copy of the Python case files (its path names the
// processes of one test: their command lines hold it), the Python worker's controller set-up and
// what /proc says about the processes a test made.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"

namespace cprr::template_test {

namespace fs = std::filesystem;

inline const std::string kPyWorker = CPRR_PYWORKER_PATH;
inline const fs::path kCaseSources = CPRR_TEMPLATE_CASES;

/// A copy of one folder of tests/recorder/engine/python in a new temp directory, removed at the
/// end. A copy, so that Python's bytecode stays out of the source tree and the path is this test's
/// own.
class CaseDir {
 public:
  explicit CaseDir(const std::string& folder) {
    std::string tmpl = (fs::temp_directory_path() / "cprr-template-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    fs::copy(kCaseSources / folder, dir_);
  }
  ~CaseDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  CaseDir(const CaseDir&) = delete;
  CaseDir& operator=(const CaseDir&) = delete;
  const fs::path& path() const { return dir_; }

 private:
  fs::path dir_;
};

/// The Python worker on the cpu backend with the cases in `dir`; ranks forked from a template
/// when `fork`, else posix_spawn'ed. Worlds shut down on the calling thread.
inline ControllerConfig python_config(const fs::path& dir, bool fork) {
  ControllerConfig c;
  c.worker = kPyWorker;
  c.worker_args = {"--cases", dir.string()};
  c.backend = BackendKind::cpu;
  c.run.fork_from_template = fork;
  c.retire_in_background = false;
  c.env = {{"CPRR_TEST_CONTROLLER", std::to_string(::getpid())}, {"PYTHONDONTWRITEBYTECODE", "1"}};
  return c;
}

/// The case instance with this label in `c`'s worker; fails the test when there is none.
inline CaseInstance instance(const ControllerConfig& c, const std::string& label) {
  for (const CaseInstance& i : expand(fetch_catalog(c.worker, c.worker_args), {})) {
    if (i.label() == label) return i;
  }
  ADD_FAILURE() << "no case " << label << " in " << c.worker_args.back();
  return {};
}

struct Proc {
  pid_t pid = 0;
  char state = '?';
  pid_t ppid = 0;
  std::string cmdline;  ///< arguments joined by spaces
};

/// Every process /proc shows.
inline std::vector<Proc> processes() {
  std::vector<Proc> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) continue;
    Proc p;
    p.pid = static_cast<pid_t>(std::atol(line.c_str()));
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    rest >> p.state >> p.ppid;
    std::ifstream cmd(e.path() / "cmdline");
    std::getline(cmd, p.cmdline, '\0');
    for (std::string arg; std::getline(cmd, arg, '\0');) p.cmdline += " " + arg;
    out.push_back(std::move(p));
  }
  return out;
}

/// Processes still running (not zombies) whose command line holds `needle`. A rank forked from
/// a template keeps the template's command line, so the case directory's path finds both.
inline std::vector<Proc> running_with(const std::string& needle) {
  std::vector<Proc> out;
  for (Proc& p : processes()) {
    if (p.state != 'Z' && p.state != 'X' && p.cmdline.find(needle) != std::string::npos) {
      out.push_back(std::move(p));
    }
  }
  return out;
}

/// This process's children with the template's command line: its template processes, and any
/// rank forked from one that is still running.
inline std::vector<Proc> template_children() {
  std::vector<Proc> out;
  for (Proc& p : running_with("--template")) {
    if (p.ppid == ::getpid()) out.push_back(std::move(p));
  }
  return out;
}

/// Waits at most `ms` for `done` to hold, looking every 20 ms.
template <class F>
bool eventually(F done, int ms = 5000) {
  for (int waited = 0; waited < ms; waited += 20) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // why: the wait's poll
  }
  return done();
}

/// This process's children that have ended and wait to be reaped.
inline std::vector<pid_t> zombie_children() {
  std::vector<pid_t> out;
  for (const Proc& p : processes()) {
    if (p.ppid == ::getpid() && p.state == 'Z') out.push_back(p.pid);
  }
  return out;
}

}  // namespace cprr::template_test

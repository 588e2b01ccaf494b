#pragma once
// Running the CLIs from tests: a command line through the shell, its stdout and exit status.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace cprr::test {

/// The tools under test, as this build made them.
inline const std::string kRecord = CPRR_CPRECORD_PATH;
inline const std::string kReplay = CPRR_CPREPLAY_PATH;

/// A new folder /tmp/`prefix`-XXXXXX; the test fails when it cannot be made.
inline std::string temp_dir(const std::string& prefix) {
  std::string t = "/tmp/" + prefix + "-XXXXXX";
  EXPECT_NE(::mkdtemp(t.data()), nullptr) << t;
  return t;
}

struct Cmd {
  int code = -1;
  std::string out;
};

/// Runs `cmdline` through the shell, capturing stdout; stderr is discarded unless merged.
inline Cmd run(const std::string& cmdline, bool merge_stderr = false) {
  Cmd r;
  FILE* p = ::popen((cmdline + (merge_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace cprr::test

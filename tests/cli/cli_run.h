#pragma once
// Running the CLIs from tests: a command line through the shell, its stdout and exit status. The
// one way the C++ tests start a tool's process and read what it printed.
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

/// Where the command's stderr goes: nowhere, into the captured stdout, or where the command line
/// says (its own `2>&1` or `2>FILE`; else the test's log).
enum class Stderr { discarded, merged, as_written };

/// Runs `cmdline` through the shell, capturing stdout; stderr as `err` says.
inline Cmd run(const std::string& cmdline, Stderr err = Stderr::discarded) {
  Cmd r;
  const char* redirect = err == Stderr::merged      ? " 2>&1"
                         : err == Stderr::discarded ? " 2>/dev/null"
                                                    : "";
  FILE* p = ::popen((cmdline + redirect).c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "popen failed for: " << cmdline;
    return r;
  }
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace cprr::test

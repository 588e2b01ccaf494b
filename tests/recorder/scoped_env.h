#pragma once
// An environment variable set for one scope (a test), unset when it ends, exceptions included;
// rank processes started meanwhile inherit it.
#include <stdlib.h>

#include <string>

namespace cprr::test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace cprr::test

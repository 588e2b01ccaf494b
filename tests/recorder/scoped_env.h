#pragma once
// An environment variable set for one scope (a test) and put back as it was when the scope
// ends, exceptions included; rank processes started meanwhile inherit it.
#include <stdlib.h>

#include <optional>
#include <string>

namespace cprr::test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* was = ::getenv(name)) before_ = was;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (before_) {
      ::setenv(name_, before_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> before_;  ///< its value before, if it was set
};

}  // namespace cprr::test

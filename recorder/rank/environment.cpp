#include "recorder/rank/environment.h"

#include <cstdlib>
#include <cstring>
#include <vector>

extern char** environ;

namespace cprr {
namespace {

std::map<std::string, std::string> current() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    out.emplace(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
  }
  return out;
}

}  // namespace

EnvironmentSnapshot EnvironmentSnapshot::capture() {
  EnvironmentSnapshot s;
  s.vars_ = current();
  return s;
}

int EnvironmentSnapshot::restore() const {
  int changed = 0;
  const auto now = current();
  for (const auto& [key, value] : now) {
    if (vars_.find(key) == vars_.end()) {
      ::unsetenv(key.c_str());
      ++changed;
    }
  }
  for (const auto& [key, value] : vars_) {
    auto it = now.find(key);
    if (it == now.end() || it->second != value) {
      ::setenv(key.c_str(), value.c_str(), 1);
      ++changed;
    }
  }
  return changed;
}

}  // namespace cprr

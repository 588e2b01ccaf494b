#pragma once
// Per-case environment reset: the rank's environment as it was at start, restored before every
// case so a case that sets NCCL_* or framework variables cannot leak them into the next one.
#include <map>
#include <string>

namespace cprr {

class EnvironmentSnapshot {
 public:
  /// Captures the current environment.
  static EnvironmentSnapshot capture();
  /// Makes the process environment equal to the snapshot (unsets additions, restores changes).
  /// Returns how many variables it changed. Call while no other thread reads the environment.
  int restore() const;

 private:
  std::map<std::string, std::string> vars_;
};

}  // namespace cprr

#pragma once
// The code a run's cases came from, as recorded: each case file (a Python run's) or the worker
// binary (a C++ run's) with a hash of its content. cpreplay compares them with the files as they
// are now: a replay of changed code may get a verdict about the change, not about the case.
#include <string>

namespace cprr {

struct CodeFile {
  std::string path;  ///< absolute
  /// XXH3-64 of its content as 16 hex digits; "" when it could not be read when recorded.
  std::string xxh3;

  bool operator==(const CodeFile&) const = default;
};

}  // namespace cprr

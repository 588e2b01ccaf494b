#include "data/execution.h"

#include <fmt/format.h>
#include <string.h>

namespace cprr {

std::string ExitInfo::describe() const {
  if (signal != 0) {
    const char* abbrev = sigabbrev_np(signal);
    return fmt::format("killed by signal {} (SIG{})", signal, abbrev ? abbrev : "?");
  }
  return fmt::format("exited with code {}", exit_code);
}

bool meets(ExecStatus s, Expect e) {
  switch (e) {
    case Expect::pass:
      return s == ExecStatus::pass;
    case Expect::fail:
      return s == ExecStatus::fail;
    case Expect::crash:
      return s == ExecStatus::crash;
    case Expect::hang:
      return s == ExecStatus::hang;
  }
  return false;
}

bool across_transports(const ExecutionResult& a, const ExecutionResult& b) {
  return !a.collectives.empty() && !b.collectives.empty() && a.collectives != b.collectives;
}

}  // namespace cprr

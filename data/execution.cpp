#include "data/execution.h"

#include <fmt/format.h>
#include <string.h>

#include <map>

namespace cprr {

std::string ExitInfo::describe() const {
  if (signal != 0) {
    const char* abbrev = sigabbrev_np(signal);
    return fmt::format("killed by signal {} (SIG{})", signal, abbrev ? abbrev : "?");
  }
  return fmt::format("exited with code {}", exit_code);
}

bool meets(ExecStatus s, Expect e) {
  // A case that skipped itself did not run: no expectation can have failed.
  if (s == ExecStatus::skip) return true;
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

std::vector<GroupRecord> groups_of(const ExecutionResult& e) {
  // By id and ranks: a library may give one number to the groups one call made.
  std::map<std::pair<uint32_t, std::vector<int32_t>>, GroupRecord> by_id;
  for (const RankReport& rep : e.ranks) {
    if (!rep.done) continue;
    for (const GroupRecord& g : rep.done->capture.groups) by_id.try_emplace({g.id, g.ranks}, g);
  }
  std::vector<GroupRecord> out;
  for (auto& [id, g] : by_id) out.push_back(std::move(g));
  return out;
}

}  // namespace cprr

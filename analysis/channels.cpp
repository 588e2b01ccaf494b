#include "analysis/channels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace cprr {

CallChannel channel_of(const CollectiveRecord& c, int rank) {
  if (!c.is_p2p()) return CallChannel{c.group, -1, -1, c.members};
  const bool sends = c.kind == "send";
  return CallChannel{c.group, sends ? rank : c.peer, sends ? c.peer : rank, c.members};
}

uint64_t reached(const std::vector<CollectiveRecord>& log, int rank, const CallChannel& ch) {
  uint64_t n = 0;
  for (const CollectiveRecord& c : log) {
    if (channel_of(c, rank) == ch) n = std::max(n, c.seq + 1);
  }
  return n;
}

std::vector<int> members_of(const CollectiveRecord& c, int world,
                            const std::vector<const std::vector<CollectiveRecord>*>& logs) {
  std::vector<int> out;
  for (int r = 0; r < world; ++r) {
    bool in = false;
    if (c.group == 0) {
      in = true;
    } else if (c.members != 0) {
      in = r < 64 && ((c.members >> r) & 1) != 0;
    } else if (r < static_cast<int>(logs.size()) && logs[r] != nullptr) {
      const CallChannel ch{c.group, -1, -1, c.members};
      in = std::any_of(logs[r]->begin(), logs[r]->end(),
                       [&](const CollectiveRecord& x) { return channel_of(x, r) == ch; });
    }
    if (in) out.push_back(r);
  }
  return out;
}

bool never_entered(const CollectiveRecord& c, int rank, int other,
                   const std::vector<const std::vector<CollectiveRecord>*>& logs) {
  if (other == rank || other < 0 || other >= static_cast<int>(logs.size()) || !logs[other]) {
    return false;
  }
  if (c.is_p2p()) {
    if (c.peer != other) return false;
  } else {
    const std::vector<int> members = members_of(c, static_cast<int>(logs.size()), logs);
    if (std::find(members.begin(), members.end(), other) == members.end()) return false;
  }
  return reached(*logs[other], other, channel_of(c, rank)) <= c.seq;
}

std::string call_phrase(const CollectiveRecord& c, bool with_site) {
  std::string text = c.is_p2p() ? fmt::format("{} #{} {} rank {}", c.kind, c.seq,
                                              c.kind == "send" ? "to" : "from", c.peer)
                                : fmt::format("collective #{} ({})", c.seq, c.kind);
  if (c.group != 0) text += fmt::format(" of group {}", c.group);
  if (with_site && !c.where.empty()) text += " at " + c.where;
  return text;
}

std::string group_phrase(uint32_t group, const std::vector<const std::vector<GroupRecord>*>& groups,
                         uint64_t members) {
  if (group == 0) return {};
  for (const std::vector<GroupRecord>* list : groups) {
    if (list == nullptr) continue;
    for (const GroupRecord& g : *list) {
      uint64_t mask = 0;
      for (int32_t r : g.ranks) mask |= r >= 0 && r < 64 ? uint64_t{1} << r : 0;
      if (g.id != group || (members != 0 && mask != members)) continue;
      return g.name.empty()
                 ? fmt::format("group {} (ranks {})", group, fmt::join(g.ranks, ","))
                 : fmt::format("group {} ({}, ranks {})", group, g.name, fmt::join(g.ranks, ","));
    }
  }
  std::vector<int> ranks;
  for (int r = 0; r < 64; ++r) {
    if (((members >> r) & 1) != 0) ranks.push_back(r);
  }
  if (ranks.empty()) return fmt::format("group {}", group);
  return fmt::format("group {} (ranks {})", group, fmt::join(ranks, ","));
}

}  // namespace cprr

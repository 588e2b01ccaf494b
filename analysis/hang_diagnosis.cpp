#include "analysis/hang_diagnosis.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <utility>

#include "analysis/channels.h"
#include "data/flight_record.h"

namespace cprr {
namespace {

struct Progress {
  bool known = true;  // false: its watchdog never answered, so where it is cannot be told
  bool done = false;
  bool wrapped = false;
  // What it entered: its collective log if it finished, else its flight record, else (no
  // flight record) the last collective its watchdog saw, as the world's.
  std::vector<CollectiveRecord> log;
  std::string doing;
};

Progress progress_of(const RankReport& rep) {
  Progress p;
  if (rep.done) {
    p.done = true;
    p.log = rep.done->capture.collectives;
    p.doing = "finished the case";
  } else if (rep.watchdog) {
    const WatchdogStatus& w = *rep.watchdog;
    p.log = rep.entered;
    // A full ring lost its oldest calls: a group or channel absent from it is not known absent.
    p.wrapped = p.log.size() + 1 >= kFlightSlots;
    // Without a flight record, the watchdog's last call stands in when it is the world's (its
    // words name a group or a peer otherwise, numbered apart).
    if (p.log.empty() && w.entered_seq >= 0 && w.entered_kind.find(' ') == std::string::npos) {
      p.log.push_back(
          CollectiveRecord{.seq = static_cast<uint64_t>(w.entered_seq), .kind = w.entered_kind});
    }
    p.doing = w.running.empty() ? "in " + w.phase
                                : fmt::format("in {}: {}", w.phase, fmt::join(w.running, "; "));
    // The flight record is written before a call starts, the watchdog's numbers once it has: a
    // status taken between the two has the record's last world collective ahead of them, and
    // that call is the one the rank waits in.
    int64_t entered = w.entered_seq;
    std::string kind = w.entered_kind;
    if (!rep.entered.empty()) {
      const CollectiveRecord& last = rep.entered.back();
      if (!last.is_p2p() && last.group == 0 && static_cast<int64_t>(last.seq) > entered &&
          static_cast<int64_t>(last.seq) > w.completed_seq) {
        entered = static_cast<int64_t>(last.seq);
        kind = last.kind;
      }
    }
    if (entered > w.completed_seq) {
      p.doing += fmt::format(" (waiting in collective #{} {})", entered, kind);
    }
  } else {
    p.known = false;
    p.doing = "no answer from its watchdog";
  }
  return p;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return fmt::format("rank{} {}", ranks.size() > 1 ? "s" : "", fmt::join(ranks, ","));
}

// "last collective #3", "last collective #2 of group 1 (all_gather)", "last recv #1 from rank 0".
std::string last_phrase(const Progress& p) {
  if (p.log.empty()) return "last collective #-1";
  const CollectiveRecord& c = p.log.back();
  if (!c.is_p2p() && c.group == 0) return fmt::format("last collective #{}", c.seq);
  return "last " + call_phrase(c, true);
}

using Logs = std::vector<const std::vector<CollectiveRecord>*>;

// Per group: the highest collective any rank that answered entered, and the members that never
// joined it. A group one of whose members finished the case without joining comes first: that
// member never will, while one still in its body may only be late (a loaded host's deadline can
// find a rank that has not reached its first call yet).
void never_joined(const std::vector<Progress>& ps, const Logs& logs,
                  const std::vector<const std::vector<GroupRecord>*>& groups,
                  std::vector<std::string>& parts) {
  std::vector<std::string> finished_behind;
  std::vector<std::string> late;
  std::map<CallChannel, std::pair<int, const CollectiveRecord*>> top;  // -> (rank, call)
  for (int r = 0; r < static_cast<int>(ps.size()); ++r) {
    if (!ps[r].known) continue;
    for (const CollectiveRecord& c : ps[r].log) {
      if (c.is_p2p()) continue;
      auto& t = top[channel_of(c, r)];
      if (t.second == nullptr || c.seq > t.second->seq) t = {r, &c};
    }
  }
  for (const auto& [ch, t] : top) {
    const CollectiveRecord& c = *t.second;
    const uint32_t group = ch.group;
    std::vector<int> behind;
    for (int m : members_of(c, static_cast<int>(ps.size()), logs)) {
      const uint64_t n = reached(ps[m].log, m, ch);
      if (ps[m].known && n <= c.seq && !(ps[m].wrapped && n == 0)) behind.push_back(m);
    }
    if (behind.empty()) continue;
    const std::string where = group == 0 ? "" : group_phrase(group, groups, c.members) + ": ";
    const bool finished =
        std::any_of(behind.begin(), behind.end(), [&](int m) { return ps[m].done; });
    (finished ? finished_behind : late)
        .push_back(fmt::format("{}{} never joined collective #{} ({}){}", where,
                               ranks_phrase(behind), c.seq, c.kind,
                               c.where.empty() ? "" : " at " + c.where));
  }
  parts.insert(parts.end(), finished_behind.begin(), finished_behind.end());
  parts.insert(parts.end(), late.begin(), late.end());
}

// A rank blocked in a send or recv whose other end never made its side: the first such call of
// its log (a stream-ordered case issues later calls behind it, so it need not be the last).
void unmatched_messages(const std::vector<Progress>& ps, std::vector<std::string>& parts) {
  for (int r = 0; r < static_cast<int>(ps.size()); ++r) {
    if (!ps[r].known || ps[r].done) continue;
    for (const CollectiveRecord& c : ps[r].log) {
      if (!c.is_p2p() || c.peer >= static_cast<int>(ps.size()) || !ps[c.peer].known) continue;
      const uint64_t other = reached(ps[c.peer].log, c.peer, channel_of(c, r));
      if (other > c.seq || (ps[c.peer].wrapped && other == 0)) continue;
      parts.push_back(fmt::format("rank {} blocked in {}; rank {} {} {}", r, call_phrase(c, true),
                                  c.peer, c.kind == "recv" ? "sent" : "received", other));
      break;
    }
  }
}

}  // namespace

std::string diagnose_hang(const std::vector<RankReport>& ranks) {
  std::vector<Progress> ps;
  for (const auto& r : ranks) ps.push_back(progress_of(r));
  Logs logs;
  std::vector<const std::vector<GroupRecord>*> groups;
  for (const auto& r : ranks) groups.push_back(r.done ? &r.done->capture.groups : nullptr);
  for (const Progress& p : ps) logs.push_back(p.known ? &p.log : nullptr);
  // Only ranks that answered (or finished) are lined up: a silent rank's progress is unknown,
  // so it is named as silent, never counted among those that "never joined".
  std::vector<int> silent;
  for (int r = 0; r < static_cast<int>(ps.size()); ++r) {
    if (!ps[r].known) silent.push_back(r);
  }
  std::vector<std::string> parts;
  if (!silent.empty()) parts.push_back(ranks_phrase(silent) + " gave no answer from the watchdog");
  unmatched_messages(ps, parts);
  never_joined(ps, logs, groups, parts);
  for (int r = 0; r < static_cast<int>(ps.size()); ++r) {
    parts.push_back(ps[r].known ? fmt::format("rank {}: {}, {}", r, ps[r].doing, last_phrase(ps[r]))
                                : fmt::format("rank {}: {}", r, ps[r].doing));
  }
  return "hang: " + fmt::format("{}", fmt::join(parts, "; "));
}

std::string describe_released(const std::vector<RankReport>& ranks, int failed) {
  std::vector<std::string> parts;
  std::vector<int> released;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const RankReport& rep = ranks[r];
    if (rep.done || rep.exit || !rep.protocol_error.empty()) continue;
    released.push_back(r);
    const Progress p = progress_of(rep);
    parts.push_back(p.known ? fmt::format("rank {} was {}", r, p.doing)
                            : fmt::format("rank {} gave {}", r, p.doing));
  }
  if (released.empty()) return {};
  return fmt::format("{} when rank {} failed: {} ended with its world, which is replaced",
                     fmt::join(parts, "; "), failed, released.size() > 1 ? "they were" : "it was");
}

}  // namespace cprr

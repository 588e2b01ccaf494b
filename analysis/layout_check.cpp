#include "analysis/layout_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <string_view>

#include "analysis/channels.h"
#include "analysis/compare.h"

namespace cprr {
namespace {

// The pools whose layout every rank must share.
constexpr std::array<std::string_view, 2> kSymmetricPools{"symmetric", "torch_symmetric"};

std::vector<const AllocRecord*> allocations_in(const CaseCapture& c, std::string_view pool) {
  std::vector<const AllocRecord*> out;
  for (const AllocRecord& a : c.allocs) {
    if (!a.is_free && a.pool == pool) out.push_back(&a);
  }
  return out;
}

// The lowest rank with a log: what the others are compared with; -1 when none has one.
template <class Log>
int reference_rank(const std::vector<const Log*>& ranks) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r]) return static_cast<int>(r);
  }
  return -1;
}

std::string side(int32_t rank, bool present, const AllocRecord& a) {
  if (!present) return fmt::format("rank {} has none", rank);
  return fmt::format("rank {} '{}' at offset {} ({} bytes)", rank, a.name, a.offset, a.bytes);
}

}  // namespace

std::string LayoutMismatch::describe() const {
  return fmt::format("{} allocation #{}: {}, {}",
                     pool == "torch_symmetric" ? "torch symmetric-memory" : "symmetric", ordinal,
                     side(rank_a, present_a, a), side(rank_b, present_b, b));
}

namespace {

std::optional<LayoutMismatch> check_pool_layout(const std::vector<const CaseCapture*>& ranks,
                                                int ref, std::string_view pool) {
  const auto want = allocations_in(*ranks[ref], pool);
  for (std::size_t r = ref + 1; r < ranks.size(); ++r) {
    if (!ranks[r]) continue;
    const auto got = allocations_in(*ranks[r], pool);
    for (std::size_t k = 0; k < std::max(want.size(), got.size()); ++k) {
      const bool has_a = k < want.size(), has_b = k < got.size();
      if (has_a && has_b && want[k]->offset == got[k]->offset && want[k]->bytes == got[k]->bytes) {
        continue;
      }
      LayoutMismatch m;
      m.pool = std::string(pool);
      m.ordinal = k;
      m.rank_a = ref;
      m.rank_b = static_cast<int32_t>(r);
      m.present_a = has_a;
      m.present_b = has_b;
      if (has_a) m.a = *want[k];
      if (has_b) m.b = *got[k];
      return m;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<LayoutMismatch> check_symmetric_layout(const std::vector<const CaseCapture*>& ranks) {
  const int ref = reference_rank(ranks);
  if (ref < 0) return std::nullopt;
  for (std::string_view pool : kSymmetricPools) {
    if (auto m = check_pool_layout(ranks, ref, pool)) return m;
  }
  return std::nullopt;
}

std::string CollectiveMismatch::describe() const {
  const std::string prefix = group_name.empty() ? "" : group_name + ": ";
  std::string text;
  if (field == "count") {
    text = p2p ? fmt::format("rank {} sent {} message(s) to rank {}, which received {}", rank_a,
                             value_a, rank_b, value_b)
               : fmt::format("rank {} made {} collective(s), rank {} made {}", rank_a, value_a,
                             rank_b, value_b);
  } else if (field == "split") {
    // "rank 0 sends 14 rows (7168 bytes) to rank 1, rank 1 expects 6 rows (3072 bytes)"
    const auto amount = [&](const std::string& bytes) {
      const uint64_t n = std::stoull(bytes);
      return row_bytes > 0 && n % row_bytes == 0
                 ? fmt::format("{} rows ({} bytes)", n / row_bytes, n)
                 : fmt::format("{} bytes", n);
    };
    text = fmt::format("collective #{} ({}): rank {} sends {} to rank {}, rank {} expects {}", seq,
                       kind, rank_a, amount(value_a), rank_b, rank_b, amount(value_b));
  } else if (p2p) {
    text = fmt::format(
        "message #{} from rank {} to rank {}: rank {} sends {} {}, rank {} receives "
        "{} {}",
        seq, rank_a, rank_b, rank_a, field, value_a, rank_b, field, value_b);
  } else {
    text = fmt::format("collective #{} ({}): rank {} has {} {}, rank {} has {} {}", seq, kind,
                       rank_a, field, value_a, rank_b, field, value_b);
  }
  if (!where_a.empty() && !where_b.empty()) {
    text += fmt::format(" (rank {} at {}, rank {} at {})", rank_a, where_a, rank_b, where_b);
  }
  return prefix + text;
}

namespace {

std::optional<CollectiveMismatch> compare_calls(const CollectiveRecord& a,
                                                const CollectiveRecord& b, int32_t ra, int32_t rb) {
  const auto differ = [&](const char* field, std::string va, std::string vb) {
    CollectiveMismatch m{a.seq, ra, rb, field, std::move(va), std::move(vb), a.kind};
    m.group = a.group;
    m.members = a.members;
    m.p2p = a.is_p2p();
    m.where_a = a.where;
    m.where_b = b.where;
    return m;
  };
  if (a.is_p2p()) {  // a send against its recv: what travels must agree
    if (a.dtype != b.dtype) {
      return differ("dtype", std::string(dtype_name(a.dtype)), std::string(dtype_name(b.dtype)));
    }
    if (a.bytes != b.bytes)
      return differ("bytes", std::to_string(a.bytes), std::to_string(b.bytes));
    return std::nullopt;
  }
  if (a.kind != b.kind) return differ("kind", a.kind, b.kind);
  if (a.dtype != b.dtype) {
    return differ("dtype", std::string(dtype_name(a.dtype)), std::string(dtype_name(b.dtype)));
  }
  if (a.root != b.root) return differ("root", std::to_string(a.root), std::to_string(b.root));
  if (a.kind == "all_reduce" && a.op != b.op) {
    return differ("op", std::string(reduce_op_name(a.op)), std::string(reduce_op_name(b.op)));
  }
  if (a.kind != "all_to_all_v" && a.bytes != b.bytes) {
    return differ("bytes", std::to_string(a.bytes), std::to_string(b.bytes));
  }
  return std::nullopt;
}

using Logs = std::vector<const std::vector<CollectiveRecord>*>;

// Every rank's records on each channel (index = rank; a rank without records has none).
std::map<CallChannel, std::vector<std::vector<const CollectiveRecord*>>> by_channel(
    const Logs& logs, bool complete) {
  std::map<CallChannel, std::vector<std::vector<const CollectiveRecord*>>> out;
  // The world's collectives are compared even where no rank made one: a count of 0 is a count.
  if (complete) out[CallChannel{}].resize(logs.size());
  for (std::size_t r = 0; r < logs.size(); ++r) {
    if (!logs[r]) continue;
    for (const CollectiveRecord& c : *logs[r]) {
      auto& sides = out[channel_of(c, static_cast<int>(r))];
      sides.resize(logs.size());
      sides[r].push_back(&c);
    }
  }
  return out;
}

// Two sides of one channel, by number: a flight record holds only an execution's last calls, so
// the two may start at different numbers.
std::optional<CollectiveMismatch> compare_sides(const std::vector<const CollectiveRecord*>& want,
                                                const std::vector<const CollectiveRecord*>& got,
                                                int32_t ra, int32_t rb) {
  std::size_t i = 0, j = 0;
  while (i < want.size() && j < got.size()) {
    if (want[i]->seq < got[j]->seq) {
      ++i;
    } else if (got[j]->seq < want[i]->seq) {
      ++j;
    } else if (auto m = compare_calls(*want[i++], *got[j++], ra, rb)) {
      return m;
    }
  }
  return std::nullopt;
}

std::optional<CollectiveMismatch> count_differs(const CallChannel& ch, std::size_t a, std::size_t b,
                                                int32_t ra, int32_t rb) {
  if (a == b) return std::nullopt;
  CollectiveMismatch m{std::min(a, b), ra, rb, "count", std::to_string(a), std::to_string(b)};
  m.group = ch.group;
  m.p2p = ch.is_p2p();
  return m;
}

// An uneven all-to-all's #k: what each member sends to each other must be what that one expects
// from it (bytes per peer, group-rank order); members whose call of #k recorded no splits, or
// splits for another group size, are not compared.
std::optional<CollectiveMismatch> check_splits(
    const std::vector<std::vector<const CollectiveRecord*>>& sides, const Logs& logs) {
  std::map<uint64_t, std::map<int, const CollectiveRecord*>> by_seq;
  for (std::size_t r = 0; r < sides.size(); ++r) {
    for (const CollectiveRecord* c : sides[r]) {
      if (c->kind == "all_to_all_v" && !c->send_bytes.empty()) {
        by_seq[c->seq][static_cast<int>(r)] = c;
      }
    }
  }
  for (const auto& [seq, calls] : by_seq) {
    const CollectiveRecord& any = *calls.begin()->second;
    const std::vector<int> members = members_of(any, static_cast<int>(logs.size()), logs);
    const auto fits = [&](const CollectiveRecord& c) {
      return c.send_bytes.size() == members.size() && c.recv_bytes.size() == members.size();
    };
    for (std::size_t i = 0; i < members.size(); ++i) {
      const auto a = calls.find(members[i]);
      if (a == calls.end() || !fits(*a->second)) continue;
      for (std::size_t j = 0; j < members.size(); ++j) {
        const auto b = calls.find(members[j]);
        if (i == j || b == calls.end() || !fits(*b->second)) continue;
        const uint64_t sent = a->second->send_bytes[j], expected = b->second->recv_bytes[i];
        if (sent == expected) continue;
        CollectiveMismatch m{seq,     members[i],           members[j],
                             "split", std::to_string(sent), std::to_string(expected),
                             any.kind};
        m.group = any.group;
        m.members = any.members;
        m.where_a = a->second->where;
        m.where_b = b->second->where;
        m.row_bytes = a->second->row_bytes == b->second->row_bytes ? a->second->row_bytes : 0;
        return m;
      }
    }
  }
  return std::nullopt;
}

std::optional<CollectiveMismatch> check_group(
    const CallChannel& ch, const std::vector<std::vector<const CollectiveRecord*>>& sides,
    const Logs& logs, bool complete) {
  if (auto m = check_splits(sides, logs)) return m;
  int ref = -1;
  for (std::size_t r = 0; r < sides.size(); ++r) {
    if (sides[r].empty()) continue;
    if (ref < 0) {
      ref = static_cast<int>(r);
    } else if (auto m = compare_sides(sides[ref], sides[r], ref, static_cast<int32_t>(r))) {
      return m;
    }
  }
  if (!complete) return std::nullopt;
  // Every member with a log made as many: one that made none is a member still.
  std::vector<int> members;
  if (ref >= 0) {
    members = members_of(*sides[ref].front(), static_cast<int>(logs.size()), logs);
  } else {
    for (std::size_t r = 0; r < logs.size(); ++r) members.push_back(static_cast<int>(r));
  }
  int first = -1;
  for (int r : members) {
    if (r >= static_cast<int>(logs.size()) || !logs[r]) continue;
    if (first < 0) {
      first = r;
    } else if (auto m = count_differs(ch, sides[first].size(), sides[r].size(), first, r)) {
      return m;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<CollectiveMismatch> check_collective_logs(const Logs& logs, bool complete) {
  for (const auto& [ch, sides] : by_channel(logs, complete)) {
    if (!ch.is_p2p()) {
      if (auto m = check_group(ch, sides, logs, complete)) return m;
      continue;
    }
    const std::size_t s = static_cast<std::size_t>(ch.sender);
    const std::size_t d = static_cast<std::size_t>(ch.receiver);
    if (s >= logs.size() || d >= logs.size()) continue;
    if (auto m = compare_sides(sides[s], sides[d], ch.sender, ch.receiver)) return m;
    if (complete && logs[s] && logs[d]) {
      if (auto m = count_differs(ch, sides[s].size(), sides[d].size(), ch.sender, ch.receiver)) {
        return m;
      }
    }
  }
  return std::nullopt;
}

std::optional<CollectiveMismatch> blocked_mismatch(const Logs& logs) {
  if (logs.size() < 2) return std::nullopt;
  // What each rank is blocked in: its last call, with only what blocks compared (dtype and
  // reduction made equal; a message's dtype of the same size travels too).
  std::vector<std::vector<CollectiveRecord>> last(logs.size());
  for (std::size_t r = 0; r < logs.size(); ++r) {
    if (logs[r] == nullptr || logs[r]->empty()) continue;
    CollectiveRecord call = logs[r]->back();
    call.dtype = DType::u8;
    call.op = ReduceOp::sum;
    last[r].push_back(std::move(call));
  }
  Logs calls;
  for (const auto& l : last) calls.push_back(l.empty() ? nullptr : &l);
  for (const auto& [ch, sides] : by_channel(calls, false)) {
    if (ch.is_p2p()) {
      const std::size_t s = static_cast<std::size_t>(ch.sender);
      const std::size_t d = static_cast<std::size_t>(ch.receiver);
      if (s < sides.size() && d < sides.size() && !sides[s].empty() && !sides[d].empty() &&
          sides[s].front()->seq == sides[d].front()->seq) {
        if (auto m = compare_calls(*sides[s].front(), *sides[d].front(), ch.sender, ch.receiver)) {
          return m;
        }
      }
      continue;
    }
    // Only when every member of the group is blocked in the same call of it.
    const CollectiveRecord* any = nullptr;
    for (const auto& side : sides) {
      if (!side.empty()) any = side.front();
    }
    if (any == nullptr) continue;
    const std::vector<int> members = members_of(*any, static_cast<int>(logs.size()), calls);
    const bool all_in =
        members.size() >= 2 && std::all_of(members.begin(), members.end(), [&](int r) {
          return !sides[r].empty() && sides[r].front()->seq == any->seq;
        });
    if (all_in) {
      if (auto m = check_group(ch, sides, calls, false)) return m;
    }
  }
  return std::nullopt;
}

namespace {

// check_collective_logs with the group named from the groups the ranks recorded.
std::optional<CollectiveMismatch> named(const Logs& logs,
                                        const std::vector<const std::vector<GroupRecord>*>& groups,
                                        bool complete) {
  std::optional<CollectiveMismatch> m = check_collective_logs(logs, complete);
  if (m) m->group_name = group_phrase(m->group, groups, m->members);
  return m;
}

}  // namespace

std::optional<CollectiveMismatch> check_collectives(const std::vector<const CaseCapture*>& ranks) {
  Logs logs;
  std::vector<const std::vector<GroupRecord>*> groups;
  for (const CaseCapture* c : ranks) {
    logs.push_back(c ? &c->collectives : nullptr);
    groups.push_back(c ? &c->groups : nullptr);
  }
  return named(logs, groups, /*complete=*/true);
}

std::optional<CollectiveMismatch> check_collectives(const ExecutionResult& e) {
  Logs logs;
  std::vector<const std::vector<GroupRecord>*> groups;
  // A body that threw stopped calling collectives early: only bodies that returned on every
  // rank make their counts comparable.
  bool complete = !e.ranks.empty();
  for (const RankReport& r : e.ranks) {
    logs.push_back(r.done ? &r.done->capture.collectives : &r.entered);
    groups.push_back(r.done ? &r.done->capture.groups : nullptr);
    complete = complete && r.done && r.done->outcome == RankOutcome::ok;
  }
  return named(logs, groups, complete);
}

namespace {

// The first completed execution where `check` finds something.
template <class Mismatch, class Check>
std::optional<Finding<Mismatch>> first_finding(const std::vector<const ExecutionResult*>& execs,
                                               Check check) {
  for (const ExecutionResult* e : execs) {
    if (!completed(*e)) continue;
    if (auto m = check(captures_of(*e))) return Finding<Mismatch>{e->id, e->mode, std::move(*m)};
  }
  return std::nullopt;
}

}  // namespace

CrossRankFindings check_cross_rank(const std::vector<const ExecutionResult*>& executions) {
  CrossRankFindings out{
      first_finding<LayoutMismatch>(executions, check_symmetric_layout), std::nullopt, {}, {}};
  // The first completed execution with reads of never-written bytes: the first is the finding,
  // the others are reported with it.
  for (const ExecutionResult* e : executions) {
    if (!completed(*e)) continue;
    std::vector<UninitRead> reads = uninitialized_reads(captures_of(*e));
    if (reads.empty()) continue;
    out.uninitialized = Finding<UninitRead>{e->id, e->mode, std::move(reads.front())};
    out.more_uninitialized.assign(std::make_move_iterator(reads.begin() + 1),
                                  std::make_move_iterator(reads.end()));
    break;
  }
  for (const ExecutionResult* e : executions) {
    if (auto m = check_collectives(*e)) {
      out.collective = Finding<CollectiveMismatch>{e->id, e->mode, std::move(*m)};
      break;
    }
  }
  return out;
}

}  // namespace cprr

#include "analysis/happens_before.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include "analysis/happens_before_clocks.h"
#include "analysis/race_fix.h"

namespace cprr {

namespace {

/// How an access uses its bytes: HbOp's reads, writes, touches (unknown direction) and unchanged
/// bytes (a read or nothing).
enum class Use : uint8_t { read, write, touch, unchanged };

/// Whether the access writes, or may.
bool may_write(Use u) { return u == Use::write || u == Use::touch; }
/// Whether the access's direction is a guess: an inferred side of a race.
bool guessed(Use u) { return u == Use::touch || u == Use::unchanged; }

/// One range of one op, keyed by whose memory it is.
struct AccessRef {
  int32_t memory_rank = 0;
  uint32_t pool = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  OpId op;
  Use use = Use::read;
  const ByteRange* range = nullptr;
};

bool same_memory(const AccessRef& a, const AccessRef& b) {
  return a.memory_rank == b.memory_rank && a.pool == b.pool;
}

bool op_less(OpId a, OpId b) { return std::tie(a.rank, a.index) < std::tie(b.rank, b.index); }

void add_ranges(std::vector<AccessRef>& out, OpId id, const std::vector<ByteRange>& ranges,
                Use use) {
  for (const ByteRange& r : ranges) {
    if (r.begin >= r.end) continue;  // an empty range touches nothing
    const int32_t memory_rank = r.owner < 0 ? id.rank : r.owner;
    out.push_back(AccessRef{memory_rank, r.pool, r.begin, r.end, id, use, &r});
  }
}

// Every range of every op, sorted so that ranges of one pool are adjacent and ordered by begin.
std::vector<AccessRef> gather_accesses(const std::vector<RankOps>& ranks) {
  std::vector<AccessRef> out;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    for (std::size_t i = 0; i < ranks[r].size(); ++i) {
      const OpId id{static_cast<int32_t>(r), static_cast<uint32_t>(i)};
      add_ranges(out, id, ranks[r][i].reads, Use::read);
      add_ranges(out, id, ranks[r][i].writes, Use::write);
      add_ranges(out, id, ranks[r][i].touches, Use::touch);
      add_ranges(out, id, ranks[r][i].unchanged, Use::unchanged);
    }
  }
  std::sort(out.begin(), out.end(), [](const AccessRef& a, const AccessRef& b) {
    return std::tie(a.memory_rank, a.pool, a.begin, a.end, a.op.rank, a.op.index, a.use) <
           std::tie(b.memory_rank, b.pool, b.begin, b.end, b.op.rank, b.op.index, b.use);
  });
  return out;
}

/// A racing op pair as found, in (rank, index) order: lo before hi.
struct PairFinding {
  bool lo_writes = false;  ///< or may write (an access of unknown direction)
  bool hi_writes = false;
  bool lo_touches = false;  ///< an overlap rests on lo's access of unknown direction
  bool hi_touches = false;
  bool exact = false;                 ///< an overlap has two known directions (so one is a write)
  std::vector<RaceOverlap> overlaps;  ///< first_* name lo's buffer, second_* hi's
};
using PairKey = std::tuple<int32_t, uint32_t, int32_t, uint32_t>;

void note_overlap(PairFinding& f, const AccessRef& lo, const AccessRef& hi) {
  f.lo_writes = f.lo_writes || may_write(lo.use);
  f.hi_writes = f.hi_writes || may_write(hi.use);
  f.lo_touches = f.lo_touches || guessed(lo.use);
  f.hi_touches = f.hi_touches || guessed(hi.use);
  f.exact = f.exact || (!guessed(lo.use) && !guessed(hi.use));
  f.overlaps.push_back(RaceOverlap{lo.pool, lo.memory_rank, std::max(lo.begin, hi.begin),
                                   std::min(lo.end, hi.end), lo.range->buffer,
                                   lo.range->buffer_name, hi.range->buffer, hi.range->buffer_name});
}

// Sweep per pool: each access meets only the later-sorted accesses that begin before it ends.
std::map<PairKey, PairFinding> find_racing_pairs(const std::vector<AccessRef>& acc,
                                                 const HbClocks& clocks) {
  std::map<PairKey, PairFinding> pairs;
  for (std::size_t i = 0; i < acc.size(); ++i) {
    for (std::size_t j = i + 1; j < acc.size(); ++j) {
      if (!same_memory(acc[i], acc[j]) || acc[j].begin >= acc[i].end) break;
      const AccessRef& a = acc[i];
      const AccessRef& b = acc[j];
      if (!may_write(a.use) && !may_write(b.use)) continue;
      if (a.op.rank == b.op.rank && a.op.index == b.op.index) continue;
      if (clocks.before(a.op, b.op) || clocks.before(b.op, a.op)) continue;
      const bool a_lo = op_less(a.op, b.op);
      const AccessRef& lo = a_lo ? a : b;
      const AccessRef& hi = a_lo ? b : a;
      note_overlap(pairs[{lo.op.rank, lo.op.index, hi.op.rank, hi.op.index}], lo, hi);
    }
  }
  return pairs;
}

RaceOp race_op(const std::vector<RankOps>& ranks, OpId id) {
  const HbOp& op = ranks[id.rank][id.index];
  return RaceOp{id.rank, op.stream, op.seq, op.kind, op.name};
}

std::string op_text(const RaceOp& op) {
  return fmt::format("op #{} ({} '{}')", op.seq, op.kind, op.name);
}

std::string thread_text(int32_t stream) {
  return stream < 0 ? std::string("the host") : fmt::format("stream {}", stream);
}

// What `b`'s thread waits for so that it follows `a`, as a clause of a fix with several edges.
std::string wait_clause(const RaceOp& a, const RaceOp& b) {
  if (a.rank != b.rank) {
    return fmt::format("a signal that rank {} sends after its {} on {}", a.rank, op_text(a),
                       thread_text(a.stream));
  }
  if (b.stream < 0)
    return fmt::format("{} synchronized after {}", thread_text(a.stream), op_text(a));
  return fmt::format("an event recorded after {} on {}", op_text(a), thread_text(a.stream));
}

// An async torch.distributed call as the Python runtime names its op ("dist.isend at f.py:3",
// "dist.all_reduce(async_op=True) at f.py:9"): what orders a later op after it is a wait() on
// the Work the call returned, which is how its user fixes the race.
bool async_torch_call(const std::string& name) {
  if (!name.starts_with("dist.")) return false;
  const std::string_view call = std::string_view(name).substr(0, name.find(" at "));
  return call.ends_with("(async_op=True)") || call == "dist.isend" || call == "dist.irecv" ||
         call == "dist.batch_isend_irecv";
}

// The edge whose absence is the race: the second op's thread must wait for the first op.
std::string fix_text(const RaceOp& a, const RaceOp& b) {
  if (a.rank != b.rank) {
    return fmt::format(
        "on rank {}, {} must wait for a signal that rank {} sends after its {} on "
        "{}, before {}",
        b.rank, thread_text(b.stream), a.rank, op_text(a), thread_text(a.stream), op_text(b));
  }
  const std::string edge =
      b.stream < 0
          ? fmt::format("the host must synchronize {} after {} before {}", thread_text(a.stream),
                        op_text(a), op_text(b))
          : fmt::format("{} must wait for an event recorded after {} on {}, before {}",
                        thread_text(b.stream), op_text(a), thread_text(a.stream), op_text(b));
  if (!async_torch_call(a.name)) return edge;
  return fmt::format("call wait() on the Work that {} returned, before {} (in the op log: {})",
                     op_text(a), op_text(b), edge);
}

// The fix of a group: one edge reads as before; several are one instruction with a clause each.
std::string fix_text(const std::vector<RaceOp>& after, const RaceOp& b) {
  if (after.size() == 1) return fix_text(after.front(), b);
  std::string clauses;
  for (std::size_t i = 0; i < after.size(); ++i) {
    clauses += (i == 0 ? "" : i + 1 == after.size() ? " and " : ", ") + wait_clause(after[i], b);
  }
  return fmt::format("on rank {}, {} must wait for {}, before {}", b.rank, thread_text(b.stream),
                     clauses, op_text(b));
}

void sort_overlaps(std::vector<RaceOverlap>& v) {
  auto key = [](const RaceOverlap& o) {
    return std::tie(o.memory_rank, o.pool, o.begin, o.end, o.first_buffer, o.second_buffer,
                    o.first_buffer_name, o.second_buffer_name);
  };
  std::sort(v.begin(), v.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  v.erase(std::unique(v.begin(), v.end(),
                      [&](const auto& a, const auto& b) { return key(a) == key(b); }),
          v.end());
}

// Across ranks the intended order is not in any one issue order; a write before a read is the
// usual intent (a put lands before the peer reads it), so the writer goes first.
bool swapped(const PairKey& key, const PairFinding& finding) {
  return std::get<0>(key) != std::get<2>(key) && finding.hi_writes && !finding.lo_writes;
}

OrientedPair orient(const PairKey& key, const PairFinding& finding) {
  const OpId lo{std::get<0>(key), std::get<1>(key)};
  const OpId hi{std::get<2>(key), std::get<3>(key)};
  const bool swap = swapped(key, finding);
  OrientedPair p{swap ? hi : lo, swap ? lo : hi, {}};
  for (const RaceOverlap& o : finding.overlaps) {
    p.second_buffers.push_back(swap ? o.first_buffer : o.second_buffer);
  }
  return p;
}

// The race as reported, in the order `pair` (orient's) gives it.
Race make_race(const std::vector<RankOps>& ranks, const PairKey& key, const OrientedPair& pair,
               PairFinding finding) {
  const bool swap = pair.first.rank != std::get<0>(key) || pair.first.index != std::get<1>(key);
  Race race;
  race.first = race_op(ranks, pair.first);
  race.second = race_op(ranks, pair.second);
  if (swap) {
    for (RaceOverlap& o : finding.overlaps) {
      std::swap(o.first_buffer, o.second_buffer);
      std::swap(o.first_buffer_name, o.second_buffer_name);
    }
  }
  race.candidate = !finding.exact;
  race.first.inferred = race.candidate && (swap ? finding.hi_touches : finding.lo_touches);
  race.second.inferred = race.candidate && (swap ? finding.lo_touches : finding.hi_touches);
  race.overlaps = std::move(finding.overlaps);
  sort_overlaps(race.overlaps);
  race.fix = fix_text(race.first, race.second);
  return race;
}

// The group's fix (race_fix.h) in place of the single pair's. Races of one group share their plan
// (`plans`, by later op and buffer): each plan rebuilds the clocks once.
using GroupKey = std::tuple<int32_t, uint32_t, uint32_t>;
void fix_group(const std::vector<RankOps>& ranks, const std::vector<OrientedPair>& oriented,
               const OrientedPair& pair, std::map<GroupKey, FixPlan>& plans, Race& race) {
  const uint32_t buffer = race.overlaps.front().second_buffer;
  const GroupKey group{pair.second.rank, pair.second.index, buffer};
  auto it = plans.find(group);
  if (it == plans.end()) {
    it = plans.emplace(group, plan_fix(ranks, oriented, pair.second, buffer)).first;
  }
  const FixPlan& plan = it->second;
  race.group_pairs = plan.group_pairs;
  race.fix_verified = plan.verified;
  race.fix_after.clear();
  for (OpId x : plan.after) race.fix_after.push_back(race_op(ranks, x));
  if (!race.fix_after.empty()) race.fix = fix_text(race.fix_after, race.second);
}

}  // namespace

std::string RaceOp::describe() const {
  const std::string where = stream < 0 ? std::string("host") : fmt::format("stream {}", stream);
  if (inferred) {
    return fmt::format("rank {} {} op #{} ({} '{}', direction unknown)", rank, where, seq, kind,
                       name);
  }
  return fmt::format("rank {} {} {}", rank, where, op_text(*this));
}

HbResult check_happens_before(const std::vector<RankOps>& ranks, const HbOptions& options) {
  const HbClocks clocks(ranks);
  std::map<PairKey, PairFinding> pairs = find_racing_pairs(gather_accesses(ranks), clocks);
  HbResult result;
  result.race_count = pairs.size();
  result.notes = clocks.notes();
  std::vector<OrientedPair> oriented;
  for (const auto& [key, finding] : pairs) oriented.push_back(orient(key, finding));
  std::map<GroupKey, FixPlan> plans;
  std::size_t n = 0;
  for (auto& [key, finding] : pairs) {
    if (result.races.size() >= options.max_races) break;
    const OrientedPair& pair = oriented[n++];
    result.races.push_back(make_race(ranks, key, pair, std::move(finding)));
    fix_group(ranks, oriented, pair, plans, result.races.back());
  }
  return result;
}

}  // namespace cprr

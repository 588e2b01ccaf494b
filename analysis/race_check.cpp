#include "analysis/race_check.h"

#include <fmt/format.h>

#include <algorithm>

#include "analysis/compare.h"
#include "analysis/op_accesses.h"
#include "runtime/error.h"

namespace cprr {

HbResult check_execution(const ExecutionResult& e, const HbOptions& options) {
  return check_happens_before(ops_from_captures(captures_of(e)), options);
}

namespace {

// Buffer-relative bytes of the first overlap, from the first op's rank's allocation log (a put's
// window has the same offset in every rank's symmetric pool).
void locate_in_buffer(const ExecutionResult& e, RaceFinding& f) {
  const RaceOverlap& o = f.race.overlaps.front();
  f.buffer_begin = o.begin;
  f.buffer_end = o.end;
  const auto rank = static_cast<std::size_t>(f.race.first.rank);
  if (rank >= e.ranks.size() || !e.ranks[rank].done) return;
  for (const AllocRecord& a : e.ranks[rank].done->capture.allocs) {
    if (!a.is_free && a.buffer == o.first_buffer && o.begin >= a.offset) {
      f.buffer_begin = o.begin - a.offset;
      f.buffer_end = o.end - a.offset;
      return;
    }
  }
}

/// Whether two races are one finding: on the same bytes of the same buffer (one bug's several
/// racing op pairs, which its fix orders together), on this rank or another that runs the same
/// code.
bool same_finding(const RaceFinding& a, const RaceFinding& b) {
  return a.race.overlaps.front().first_buffer_name == b.race.overlaps.front().first_buffer_name &&
         a.buffer_begin < b.buffer_end && b.buffer_begin < a.buffer_end;
}

/// Keeps `race` among the finding's others, unless it is one finding with the finding's own
/// race or with one kept already (then, on another rank, that one's same_on_ranks gets it).
void add_other(const ExecutionResult& e, const Race& race, RaceFinding& found) {
  RaceFinding other;
  other.execution = e.id;
  other.mode = e.mode;
  other.race = race;
  locate_in_buffer(e, other);
  if (same_finding(other, found)) return;
  for (RaceFinding& kept : found.others) {
    if (!same_finding(other, kept)) continue;
    const int32_t rank = race.first.rank;
    if (rank != kept.race.first.rank &&
        std::find(kept.same_on_ranks.begin(), kept.same_on_ranks.end(), rank) ==
            kept.same_on_ranks.end()) {
      kept.same_on_ranks.push_back(rank);
    }
    return;
  }
  if (found.others.size() < kOtherRaces) found.others.push_back(std::move(other));
}

// Work a case issued on a native handle itself, or its library issued past the op log ("unseen"),
// is invisible to every log check: say so, once per rank and kind, instead of letting a clean
// report suggest it was checked.
template <class Note>
void note_unchecked_work(const ExecutionResult& e, const Note& note) {
  const std::vector<const CaseCapture*> captures = captures_of(e);
  for (std::size_t r = 0; r < captures.size(); ++r) {
    if (captures[r] == nullptr) continue;
    for (const OpRecord& op : captures[r]->ops) {
      if (op.kind == "unseen") {
        note(
            fmt::format("rank {}: {}; no race, uninitialized-read or layout check sees that "
                        "work",
                        r, op.name));
      }
      if (op.kind != "handle") continue;
      note(
          fmt::format("rank {} took {} outside Context::native(): work issued on it directly "
                      "is not in the op log, so no race, uninitialized-read or layout check "
                      "sees it (run it through Context::native() to have it checked)",
                      r, op.name));
    }
  }
}

}  // namespace

std::optional<RaceFinding> find_race(const std::vector<const ExecutionResult*>& executions,
                                     std::vector<std::string>* notes) {
  std::optional<RaceFinding> found;
  const auto note = [&](std::string text) {
    if (notes && std::find(notes->begin(), notes->end(), text) == notes->end()) {
      notes->push_back(std::move(text));
    }
  };
  for (const ExecutionResult* e : executions) {
    if (!completed(*e)) continue;
    note_unchecked_work(*e, note);
    HbResult r;
    // Later executions only count, once a race of known directions is found: until then each
    // one's races are looked through for one (each kept race gets a fix).
    const bool settled = found && !found->race.candidate;
    try {
      // Enough to find kOtherRaces distinct ones past the same race on each rank.
      r = check_execution(*e, HbOptions{.max_races = settled ? 1 : 8 * (1 + kOtherRaces)});
    } catch (const Error& err) {
      note(fmt::format("execution {}: the op log could not be checked: {}", e->id, err.what()));
      continue;
    }
    for (std::string& n : r.notes) note(fmt::format("execution {}: {}", e->id, n));
    if (r.race_count == 0) continue;
    // The finding is the first race of known directions, else the first candidate.
    const auto exact = std::find_if(r.races.begin(), r.races.end(),
                                    [](const Race& race) { return !race.candidate; });
    if (!found || (!settled && exact != r.races.end())) {
      const std::size_t executions_before = found ? found->executions : 0;
      const std::size_t first = exact == r.races.end() ? 0 : exact - r.races.begin();
      found = RaceFinding{e->id, e->mode, r.races[first], r.race_count, executions_before};
      locate_in_buffer(*e, *found);
      for (std::size_t k = 0; k < r.races.size(); ++k) {
        if (k != first) add_other(*e, r.races[k], *found);
      }
    }
    ++found->executions;
  }
  return found;
}

std::string describe_fix(const Race& race) {
  const std::string later = fmt::format("op #{}", race.second.seq);
  std::string out = race.fix;
  if (race.group_pairs > 1) {
    out += fmt::format(" (orders all {} racing pairs that end at {} on these bytes)",
                       race.group_pairs, later);
  }
  out += race.fix_verified
             ? fmt::format(
                   "; verified against the op log: with this ordering no earlier op races with {} "
                   "on these bytes",
                   later)
             : fmt::format(
                   "; NOT verified: with this ordering an earlier op still races with {} on these "
                   "bytes",
                   later);
  return out;
}

std::string describe_race(const RaceFinding& f) {
  const Race& race = f.race;
  const RaceOverlap& o = race.overlaps.front();
  std::string buffer = fmt::format("'{}'", o.first_buffer_name);
  if (o.second_buffer != o.first_buffer || o.second_buffer_name != o.first_buffer_name) {
    buffer += fmt::format(" / '{}'", o.second_buffer_name);  // freed and reused bytes
  }
  return fmt::format("{} and {} race on bytes [{}, {}) of {} ({} pool of rank {}){}",
                     race.first.describe(), race.second.describe(), f.buffer_begin, f.buffer_end,
                     buffer, pool_name(o.pool), o.memory_rank,
                     race.overlaps.size() > 1
                         ? fmt::format(" and {} more range(s)", race.overlaps.size() - 1)
                         : "");
}

std::string describe_other_race(const RaceFinding& other) {
  return fmt::format(
      "{}{} (not replayed)", describe_race(other),
      other.same_on_ranks.empty()
          ? ""
          : fmt::format(" (the same on rank(s) {})", fmt::join(other.same_on_ranks, ", ")));
}

}  // namespace cprr

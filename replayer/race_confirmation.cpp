#include "replayer/race_confirmation.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "analysis/compare.h"
#include "data/text_forms.h"

namespace cprr {
namespace {

class Confirmer {
 public:
  Confirmer(const RaceFinding& race, const PerturbedRun& run, const ConfirmOptions& options,
            RaceConfirmation& out)
      : race_(race.race), run_(run), options_(options), out_(out) {}

  /// The serialized run: the reference the others are compared with. Nullopt when it did not
  /// complete, or failed where every unperturbed run passed: serializing broke the case itself
  /// (a CUDA graph capture that a host sync invalidates, a check of the streams' own state), and
  /// a reference that is missing its outputs would make every other run "differ".
  std::optional<ExecutionResult> serialize(const std::vector<const ExecutionResult*>& observed) {
    Perturbation p;
    p.one_stream = true;
    ExecutionResult r = replay(p, 0);  // amplification follows only when this one completes
    if (!completed(r)) {
      say(fmt::format("serialized replay: {} ({}): no reference to compare with",
                      status_name(r.status), r.summary));
      return std::nullopt;
    }
    const bool all_passed =
        !observed.empty() && std::all_of(observed.begin(), observed.end(), [](const auto* e) {
          return e->status == ExecStatus::pass;
        });
    if (r.status == ExecStatus::fail && all_passed) {
      say(
          fmt::format("serialized replay: fail ({}) where every recorded run passed: serializing "
                      "the streams broke the case itself, so its outputs are no reference",
                      r.summary));
      return std::nullopt;
    }
    say("serialized replay (every stream as one, in issue order): the reference outputs");
    return r;
  }

  void check_serialization(const ExecutionResult& serial,
                           const std::vector<const ExecutionResult*>& observed) {
    if (race_.first.rank != race_.second.rank) {
      say("serialization does not order ops of different ranks: its outputs are only a reference");
      return;
    }
    bool compared = false;
    for (const ExecutionResult* e : observed) {
      // A run through another transport (a record with a GPU per rank replayed on one GPU) may
      // differ by reduction order alone: it confirms nothing.
      if (!completed(*e) || across_transports(serial, *e)) continue;
      compared = true;
      if (const auto d = compare(serial, *e)) {
        out_.confirmed_by.push_back("serialization");
        say(
            fmt::format("serialization confirms: execution {} ({}) differs from the serialized "
                        "outputs, which the serialized run does not show: {}",
                        e->id, mode_name(e->mode), d->describe()));
        return;
      }
    }
    if (!compared) {
      say("serialization: no unperturbed run on this transport to compare the serialized outputs "
          "with");
      return;
    }
    say("serialization: every unperturbed run already gave the serialized outputs (the race was "
        "latent there)");
  }

  // Odd seeds delay the race's first op, even seeds its second: when the two ops really are
  // unordered, which one wins flips, and so do the outputs.
  void amplify(const ExecutionResult& serial, uint64_t ops_on_rank) {
    std::optional<ExecutionResult> earlier;
    for (int k = 1; k <= options_.seeds; ++k) {
      const auto seed = static_cast<uint64_t>(k);
      // A seed that shows the race leads to the bisection, one that does not to the next seed:
      // either way at least this many replays follow.
      const ExecutionResult r =
          replay(amplified(seed), std::min(bisection_floor(ops_on_rank), options_.seeds - k));
      ++out_.seeds_run;
      const std::string what =
          fmt::format("amplified replay, seed {} (long delay before the {} op)", k,
                      seed % 2 == 1 ? "first" : "second");
      bool shown = differs(serial, r, what);
      if (!shown && earlier && completed(r)) {
        if (const auto d = compare(*earlier, r)) {
          say(fmt::format("{}: differs from the seed {} replay: {}", what, k - 1, d->describe()));
          shown = true;
        }
      }
      if (shown) {
        out_.amplifying_seed = seed;
        out_.confirmed_by.push_back("amplification");
        return;
      }
      if (completed(r)) earlier = r;
    }
    say(fmt::format("amplification: {} seed(s) gave the serialized outputs", out_.seeds_run));
  }

  void bisect(const ExecutionResult& serial, uint64_t ops_on_rank) {
    if (race_.first.rank != race_.second.rank) {
      say("sync bisection skipped: the ops are on different ranks, so no host synchronization of "
          "one rank orders them (the missing edge is a signal/wait)");
      return;
    }
    if (!out_.amplifying_seed || ops_on_rank < 2) {
      say("sync bisection skipped: no amplification seed showed the race to bisect against");
      return;
    }
    // The delays bisected against: the long one before the race's first op alone, so that no
    // random delay elsewhere shows another race; seed 1's (random delays too) when that alone
    // does not show this one.
    Perturbation base = amplified(0);
    if (base.delay_ops.empty() ||
        !differs(serial, replay(base, 1), "the delay before the race's first op alone")) {
      base = amplified(1);
    }
    // right(i): the outputs are right with the host synchronizing after each op i .. n-2 of every
    // rank (every rank: the ranks run the same code and their races feed collectives). A suffix,
    // so the races the fix would expose after this one stay fixed while the search moves.
    const uint64_t last = ops_on_rank - 2;  // no op follows a sync after the last op
    // Only "right" can be luck: a sync that orders the pair forces the right outputs every time,
    // but a host stalled past the delay may also let the race's ops land in order unsynced. So
    // a step that reads right is run `tries` times and must read right each time; one wrong
    // reading settles it.
    const auto right = [&](uint64_t i, int then, int tries) {
      Perturbation p = base;
      for (uint64_t k = i; k <= last; ++k) p.sync_after.push_back(OpSite{-1, k});
      for (int t = 1; t <= tries; ++t) {
        const ExecutionResult r = replay(p, then);
        const std::string what =
            fmt::format("host sync after ops #{}..#{}{}", i, last,
                        t > 1 ? fmt::format(" (again, {} of {})", t, tries) : std::string{});
        if (differs(serial, r, what)) return false;
      }
      return true;
    };
    if (!right(0, 0, 1)) {  // the bisection follows only when this one is right
      say(
          fmt::format("sync bisection: even a sync after every op of every rank leaves the "
                      "outputs wrong"));
      return;
    }
    // right(lo) holds, right(last + 1) (no sync: the base run) does not: the greatest lo with
    // right(lo) is the boundary whose sync the outputs need.
    uint64_t lo = 0, hi = last + 1;
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      // Either half left is at least floor((hi - lo) / 2) long, which takes at least
      // floor(log2) more steps: floor(log2(hi - lo)) - 1.
      const int then = static_cast<int>(std::bit_width(hi - lo)) - 2;
      (right(mid, then, options_.right_tries) ? lo : hi) = mid;
    }
    const OpSite edge{race_.second.rank, lo};
    out_.sync_edge = edge;
    out_.sync_agrees = edge.seq >= race_.first.seq && edge.seq < race_.second.seq;
    say(
        fmt::format("sync bisection: the sync after op #{} of rank {} is the one the outputs need; "
                    "{}",
                    edge.seq, edge.rank,
                    out_.sync_agrees ? "it lies between the race's two ops"
                                     : "it does NOT lie between the race's two ops"));
    if (out_.sync_agrees) out_.confirmed_by.push_back("sync_bisection");
  }

  // The fix applied (see the header); true when it showed the race. `observed`: the unperturbed
  // fresh runs.
  bool apply_fix(const std::vector<const ExecutionResult*>& observed) {
    if (race_.first.rank != race_.second.rank) return false;  // no host sync orders two ranks
    // On the transport of the latest run (a replay's, as the fix applied's will be): a record
    // made with a GPU per rank and replayed on one GPU may differ by reduction order alone.
    std::vector<const ExecutionResult*> runs;
    for (auto it = observed.rbegin(); it != observed.rend(); ++it) {
      if (completed(**it) && (runs.empty() || !across_transports(*runs.front(), **it))) {
        runs.push_back(*it);
      }
    }
    std::optional<ExecutionResult> again;  // repeated runs must agree before one is perturbed
    if (runs.size() < 2) {
      again = replay(Perturbation{}, 0);
      if (completed(*again) && (runs.empty() || !across_transports(*runs.front(), *again))) {
        runs.push_back(&*again);
      }
    }
    if (runs.size() < 2) {
      say("fix applied: skipped, as no two unperturbed runs completed to compare it with");
      return false;
    }
    for (std::size_t k = 1; k < runs.size(); ++k) {
      if (const auto d = compare(*runs.front(), *runs[k])) {
        say(
            fmt::format("fix applied: skipped, as the unperturbed runs already disagree with "
                        "each other ({}): that is nondeterminism, which no perturbation of this "
                        "pair may be credited with",
                        d->describe()));
        return false;
      }
    }
    Perturbation held;
    held.sync_after.push_back(OpSite{race_.first.rank, race_.first.seq});
    const ExecutionResult r = replay(held, 0);
    const std::string what =
        fmt::format("fix applied (op #{} held until op #{} of rank {} completed)", race_.second.seq,
                    race_.first.seq, race_.first.rank);
    if (!completed(r)) {
      say(fmt::format("{}: {} ({}): no confirmation", what, status_name(r.status), r.summary));
      return false;
    }
    if (across_transports(*runs.front(), r)) {
      say(fmt::format("{}: ran on another transport than the unperturbed runs: no confirmation",
                      what));
      return false;
    }
    const auto d = compare(*runs.front(), r);
    if (!d) {
      say(fmt::format("{}: the outputs of the {} unperturbed runs", what, runs.size()));
      return false;
    }
    out_.confirmed_by.push_back("fix_applied");
    out_.recorded_order = fmt::format(
        "the recorded runs took {} before {} had completed: {} unperturbed runs agree, and "
        "holding it until then changes the outputs",
        race_.second.describe(), race_.first.describe(), runs.size());
    say(
        fmt::format("{}: differs from the {} unperturbed runs, which agree with each other: {}; "
                    "{}",
                    what, runs.size(), d->describe(), out_.recorded_order));
    return true;
  }

 private:
  /// Seeded random delays (none for seed 0) and a long one before the race's first op (second
  /// for even seeds), when that op is a stream op (the host is never delayed).
  Perturbation amplified(uint64_t seed) const {
    Perturbation p;
    p.delay_seed = seed;
    p.max_delay_us = options_.max_delay_us;
    const RaceOp& target = seed != 0 && seed % 2 == 0 ? race_.second : race_.first;
    if (target.stream >= 0) {
      p.delay_ops.push_back(OpSite{target.rank, target.seq});
      p.target_delay_us = options_.target_delay_us;
    }
    return p;
  }

  // How many replays bisect() is certain to make once a seed showed the race: the one with the
  // delay before the first op alone (when that op is a stream op) and the one with every sync.
  int bisection_floor(uint64_t ops_on_rank) const {
    if (race_.first.rank != race_.second.rank || ops_on_rank < 2) return 0;
    return (amplified(0).delay_ops.empty() ? 0 : 1) + 1;
  }

  // `then`: the replays certain to follow this one (PerturbedRun).
  ExecutionResult replay(const Perturbation& p, int then) {
    ++out_.replays;
    return run_(p, then);
  }

  // True (and said) when `r` shows the race: it did not complete, or its outputs differ.
  bool differs(const ExecutionResult& serial, const ExecutionResult& r, const std::string& label) {
    // The slowest rank's body time shows whether the delays took effect.
    double body_ms = 0;
    for (const RankReport& rank : r.ranks) {
      if (rank.done) body_ms = std::max(body_ms, rank.done->body_ms);
    }
    const std::string what = fmt::format("{} [body {:.1f} ms]", label, body_ms);
    if (!completed(r)) {
      say(fmt::format("{}: {} ({})", what, status_name(r.status), r.summary));
      return true;
    }
    if (const auto d = compare(serial, r)) {
      say(fmt::format("{}: differs from the serialized outputs: {}", what, d->describe()));
      return true;
    }
    say(fmt::format("{}: the serialized outputs", what));
    return false;
  }

  void say(std::string line) { out_.log.push_back(std::move(line)); }

  const Race& race_;
  const PerturbedRun& run_;
  const ConfirmOptions& options_;
  RaceConfirmation& out_;
};

}  // namespace

bool RaceConfirmation::shows(const Race& race) const {
  if (confirmed_by.empty()) return false;
  if (!race.candidate || race.first.rank != race.second.rank) return true;
  return (sync_edge && sync_agrees) ||
         std::find(confirmed_by.begin(), confirmed_by.end(), "fix_applied") != confirmed_by.end();
}

RaceConfirmation confirm_race(const RaceFinding& race,
                              const std::vector<const ExecutionResult*>& observed,
                              uint64_t ops_on_rank, const PerturbedRun& run,
                              const ConfirmOptions& options) {
  RaceConfirmation out;
  Confirmer c(race, run, options, out);
  const std::optional<ExecutionResult> serial = c.serialize(observed);
  if (serial) c.check_serialization(*serial, observed);
  // The fix applied says most, in a replay or two: this pair, and the order the recorded runs
  // took. The delays and the bisection follow only where it showed nothing.
  if (c.apply_fix(observed) || !serial) return out;
  c.amplify(*serial, ops_on_rank);
  c.bisect(*serial, ops_on_rank);
  return out;
}

}  // namespace cprr

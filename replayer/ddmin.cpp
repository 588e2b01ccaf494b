#include "replayer/ddmin.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace cprr {
namespace {

using Subset = std::vector<std::size_t>;

/// The indices [lo, hi), ascending.
Subset index_range(std::size_t lo, std::size_t hi) {
  Subset out(hi - lo);
  std::iota(out.begin(), out.end(), lo);
  return out;
}

/// The oracle behind a memo: each call is a full replay, so an identical subset (which bisection
/// and ddmin, or ddmin's subsets and complements, can produce more than once) is answered from the
/// memo, and only real replays are counted.
class MemoOracle {
 public:
  MemoOracle(const PolluterOracle& reproduces, std::size_t n) : reproduces_(reproduces) {
    // The caller has seen all n reproduce (the precondition); recording it spares n == 1 a replay.
    seen_.emplace(index_range(0, n), true);
  }

  bool operator()(const Subset& subset) {
    if (auto it = seen_.find(subset); it != seen_.end()) return it->second;
    ++tests_;
    const bool hit = reproduces_(subset);
    seen_.emplace(subset, hit);
    return hit;
  }

  int tests() const { return tests_; }

 private:
  const PolluterOracle& reproduces_;
  std::map<Subset, bool> seen_;
  int tests_ = 0;
};

/// What bisection learned: its single candidate, and the smallest subset it saw reproduce.
struct Bisection {
  std::size_t candidate = 0;
  Subset smallest_reproducing;
};

/// Phase 1, assuming one polluter: halve [lo, hi) by testing only the first half. A miss puts the
/// polluter in the second half without a test, so the worst case is ceil(log2 n) replays.
Bisection bisect(std::size_t n, MemoOracle& reproduces) {
  Bisection out{.candidate = 0, .smallest_reproducing = index_range(0, n)};
  std::size_t lo = 0;
  std::size_t hi = n;
  while (hi - lo > 1) {
    // The first half is the smaller one (floor): hits shrink the range the most when they are
    // cheapest to confirm, and a miss still leaves ceil((hi - lo) / 2).
    const std::size_t mid = lo + (hi - lo) / 2;
    Subset first = index_range(lo, mid);
    if (reproduces(first)) {
      hi = mid;
      out.smallest_reproducing = std::move(first);
    } else {
      lo = mid;
    }
  }
  out.candidate = lo;
  return out;
}

/// Splits `set` (ascending) into `parts` contiguous chunks whose sizes differ by at most one, so
/// every chunk stays ascending and none is empty (parts <= set.size()).
std::vector<Subset> split(const Subset& set, std::size_t parts) {
  std::vector<Subset> out;
  out.reserve(parts);
  std::size_t begin = 0;
  for (std::size_t i = 0; i < parts; ++i) {
    const std::size_t end = begin + (set.size() - begin) / (parts - i);
    out.emplace_back(set.begin() + static_cast<std::ptrdiff_t>(begin),
                     set.begin() + static_cast<std::ptrdiff_t>(end));
    begin = end;
  }
  return out;
}

/// Everything in `parts` except parts[skip], in order (so ascending, like the parts).
Subset complement(const std::vector<Subset>& parts, std::size_t skip) {
  Subset out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i != skip) out.insert(out.end(), parts[i].begin(), parts[i].end());
  }
  return out;
}

/// The first part that reproduces on its own (ddmin's "reduce to subset").
std::optional<Subset> reproducing_part(const std::vector<Subset>& parts, MemoOracle& reproduces) {
  for (const Subset& part : parts) {
    if (reproduces(part)) return part;
  }
  return std::nullopt;
}

/// The first complement that still reproduces (ddmin's "reduce to complement"). Built one at a
/// time: at fine granularity all complements together would be quadratic in memory.
std::optional<Subset> reproducing_complement(const std::vector<Subset>& parts,
                                             MemoOracle& reproduces) {
  // With two parts each complement is the other part, already tested just before.
  if (parts.size() <= 2) return std::nullopt;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    Subset rest = complement(parts, i);
    if (reproduces(rest)) return rest;
  }
  return std::nullopt;
}

/// Phase 2, Zeller's ddmin2 from a reproducing `set`: returns a 1-minimal reproducing subset of
/// it. A single element is taken as minimal without testing the empty set: the target alone is
/// not polluted (it passes in a fresh process, which is why it is being localized at all).
Subset ddmin(Subset set, MemoOracle& reproduces) {
  std::size_t granularity = 2;
  while (set.size() >= 2) {
    const std::vector<Subset> parts = split(set, granularity);
    if (auto part = reproducing_part(parts, reproduces)) {
      set = std::move(*part);
      granularity = 2;
    } else if (auto rest = reproducing_complement(parts, reproduces)) {
      set = std::move(*rest);
      granularity = std::max<std::size_t>(granularity - 1, 2);
    } else if (granularity < set.size()) {
      granularity = std::min(granularity * 2, set.size());
    } else {
      break;  // every single element was removed in turn and none is dispensable: 1-minimal
    }
  }
  return set;
}

}  // namespace

MinimizeResult minimize_polluters(std::size_t n, const PolluterOracle& reproduces) {
  CPRR_CHECK(static_cast<bool>(reproduces), "minimize_polluters: no oracle given");
  if (n == 0) return {};
  MemoOracle memo(reproduces, n);
  Bisection bisection = bisect(n, memo);
  if (memo({bisection.candidate})) return {{bisection.candidate}, memo.tests()};
  // Several polluters acting together. Any subset bisection saw reproduce is as valid a start as
  // the full set (ddmin only needs a reproducing one) and a smaller start costs fewer replays.
  Subset polluters = ddmin(std::move(bisection.smallest_reproducing), memo);
  return {std::move(polluters), memo.tests()};
}

}  // namespace cprr

#include "replayer/ddmin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace cprr {
namespace {

using Subset = std::vector<std::size_t>;
using Predicate = std::function<bool(const Subset&)>;

/// ceil(log2 n) for n >= 1, computed on integers so n = 8 gives exactly 3.
int ceil_log2(std::size_t n) {
  int bits = 0;
  while ((std::size_t{1} << bits) < n) ++bits;
  return bits;
}

Subset all_indices(std::size_t n) {
  Subset all(n);
  for (std::size_t i = 0; i < n; ++i) all[i] = i;
  return all;
}

bool contains(const Subset& subset, std::size_t index) {
  return std::binary_search(subset.begin(), subset.end(), index);
}

/// A synthetic oracle that checks every call against the contract: a subset is never asked twice,
/// is strictly ascending, lies in [0, n) and is never empty (the target alone is not polluted, so
/// the empty set is never needed to answer).
class CheckedOracle {
 public:
  CheckedOracle(std::size_t n, Predicate pollutes) : n_(n), pollutes_(std::move(pollutes)) {}

  PolluterOracle oracle() {
    return [this](const Subset& subset) { return call(subset); };
  }
  int calls() const { return static_cast<int>(asked_.size()); }
  bool pollutes(const Subset& subset) const { return pollutes_(subset); }

 private:
  bool call(const Subset& subset) {
    EXPECT_FALSE(subset.empty()) << "the empty set was tested";
    EXPECT_TRUE(std::is_sorted(subset.begin(), subset.end()));
    EXPECT_EQ(std::adjacent_find(subset.begin(), subset.end()), subset.end()) << "duplicate index";
    if (!subset.empty()) {
      EXPECT_LT(subset.back(), n_) << "index out of range";
    }
    EXPECT_TRUE(asked_.insert(subset).second) << "subset tested twice, size " << subset.size();
    return pollutes_(subset);
  }

  std::size_t n_;
  Predicate pollutes_;
  std::set<Subset> asked_;
};

/// Runs the minimizer and checks what holds for every answer: it reproduces, is 1-minimal
/// (dropping any one index loses the pollution), is ascending, and `tests` counts every call.
MinimizeResult minimize_checked(std::size_t n, Predicate pollutes) {
  CheckedOracle oracle(n, std::move(pollutes));
  if (n > 0) {
    EXPECT_TRUE(oracle.pollutes(all_indices(n)))
        << "test bug: the precondition (all n reproduce) does not hold";
  }
  MinimizeResult result = minimize_polluters(n, oracle.oracle());
  EXPECT_EQ(result.tests, oracle.calls());
  EXPECT_TRUE(std::is_sorted(result.polluters.begin(), result.polluters.end()));
  EXPECT_TRUE(oracle.pollutes(result.polluters)) << "the answer does not reproduce";
  for (std::size_t drop = 0; drop < result.polluters.size(); ++drop) {
    Subset smaller = result.polluters;
    smaller.erase(smaller.begin() + static_cast<std::ptrdiff_t>(drop));
    EXPECT_FALSE(!smaller.empty() && oracle.pollutes(smaller))
        << "not 1-minimal: still reproduces without " << result.polluters[drop];
  }
  return result;
}

/// Pollution that shows only when every index of `together` ran before the target.
Predicate all_of(Subset together) {
  return [together](const Subset& subset) {
    return std::all_of(together.begin(), together.end(),
                       [&](std::size_t i) { return contains(subset, i); });
  };
}

TEST(MinimizePolluters, EmptyInputNeedsNoTest) {
  MinimizeResult result = minimize_checked(0, [](const Subset&) { return true; });
  EXPECT_TRUE(result.polluters.empty());
  EXPECT_EQ(result.tests, 0);
}

TEST(MinimizePolluters, MissingOracleIsAnError) {
  EXPECT_THROW(minimize_polluters(3, PolluterOracle{}), Error);
}

TEST(MinimizePolluters, SinglePolluterAmongThousandTakesLogTests) {
  constexpr std::size_t kN = 1000;
  std::vector<std::size_t> positions = {0, 1, 499, 500, 998, 999};
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<std::size_t> pick(0, kN - 1);
  for (int i = 0; i < 8; ++i) positions.push_back(pick(rng));
  for (std::size_t p : positions) {
    SCOPED_TRACE("polluter " + std::to_string(p));
    MinimizeResult result = minimize_checked(kN, all_of({p}));
    EXPECT_EQ(result.polluters, Subset{p});
    EXPECT_LE(result.tests, ceil_log2(kN) + 1);
  }
  EXPECT_EQ(ceil_log2(kN) + 1, 11);
}

TEST(MinimizePolluters, SinglePolluterAtEveryPositionOfSmallLists) {
  for (std::size_t n : {1, 2, 3, 7, 8, 9}) {
    for (std::size_t p = 0; p < n; ++p) {
      SCOPED_TRACE("n " + std::to_string(n) + ", polluter " + std::to_string(p));
      MinimizeResult result = minimize_checked(n, all_of({p}));
      EXPECT_EQ(result.polluters, Subset{p});
      EXPECT_LE(result.tests, ceil_log2(n) + 1);
    }
  }
}

TEST(MinimizePolluters, OnlyPredecessorNeedsNoReplay) {
  // The caller has already seen the full list (here: just index 0) reproduce.
  MinimizeResult result = minimize_checked(1, all_of({0}));
  EXPECT_EQ(result.polluters, Subset{0});
  EXPECT_EQ(result.tests, 0);
}

TEST(MinimizePolluters, PairActingOnlyTogetherAmongThousand) {
  constexpr std::size_t kN = 1000;
  const std::vector<Subset> pairs = {{0, 1},   {499, 500}, {998, 999}, {0, 999},   {10, 20},
                                     {3, 740}, {250, 251}, {123, 877}, {600, 601}, {1, 998}};
  for (const Subset& pair : pairs) {
    const std::string name = std::to_string(pair[0]) + "_" + std::to_string(pair[1]);
    SCOPED_TRACE("pair " + name);
    MinimizeResult result = minimize_checked(kN, all_of(pair));
    EXPECT_EQ(result.polluters, pair);
    EXPECT_LT(result.tests, 200);
    ::testing::Test::RecordProperty("tests_pair_" + name, result.tests);
  }
}

TEST(MinimizePolluters, PairActingOnlyTogetherInSmallLists) {
  for (std::size_t n : {2, 3, 4, 7, 8, 9}) {
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = a + 1; b < n; ++b) {
        SCOPED_TRACE("n " + std::to_string(n) + ", pair " + std::to_string(a) + "," +
                     std::to_string(b));
        MinimizeResult result = minimize_checked(n, all_of({a, b}));
        EXPECT_EQ(result.polluters, (Subset{a, b}));
      }
    }
  }
}

TEST(MinimizePolluters, TripleActingOnlyTogether) {
  const std::vector<std::pair<std::size_t, Subset>> cases = {
      {1000, {0, 500, 999}}, {1000, {10, 11, 12}}, {1000, {7, 300, 301}},
      {5, {0, 2, 4}},        {3, {0, 1, 2}},       {9, {1, 4, 8}}};
  for (const auto& [n, triple] : cases) {
    SCOPED_TRACE("n " + std::to_string(n) + ", first " + std::to_string(triple[0]));
    MinimizeResult result = minimize_checked(n, all_of(triple));
    EXPECT_EQ(result.polluters, triple);
    ::testing::Test::RecordProperty(
        "tests_triple_n" + std::to_string(n) + "_" + std::to_string(triple[0]), result.tests);
  }
}

TEST(MinimizePolluters, EitherOfTwoGivesJustOne) {
  const std::vector<std::pair<std::size_t, Subset>> cases = {
      {1000, {3, 900}}, {1000, {499, 500}}, {1000, {0, 999}}, {2, {0, 1}}, {9, {2, 7}}};
  for (const auto& [n, either] : cases) {
    SCOPED_TRACE("n " + std::to_string(n) + ", either " + std::to_string(either[0]) + " or " +
                 std::to_string(either[1]));
    const std::size_t a = either[0];
    const std::size_t b = either[1];
    MinimizeResult result =
        minimize_checked(n, [a, b](const Subset& s) { return contains(s, a) || contains(s, b); });
    ASSERT_EQ(result.polluters.size(), 1u);
    EXPECT_TRUE(result.polluters[0] == a || result.polluters[0] == b);
    EXPECT_LE(result.tests, ceil_log2(n) + 1) << "one of them alone is the single-polluter case";
  }
}

TEST(MinimizePolluters, AnyOfSeveralGroupsGivesExactlyOneGroup) {
  // Pollution by any one of several disjoint groups acting together: a 1-minimal answer holds a
  // whole group and nothing else (any extra index could be dropped), so it is exactly one group.
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    const std::size_t n = std::uniform_int_distribution<std::size_t>(9, 300)(rng);
    Subset order = all_indices(n);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<Subset> groups;
    std::size_t next = 0;
    const int group_count = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int g = 0; g < group_count; ++g) {
      const std::size_t size = std::uniform_int_distribution<std::size_t>(1, 3)(rng);
      Subset group(order.begin() + next, order.begin() + next + size);
      std::sort(group.begin(), group.end());
      groups.push_back(group);
      next += size;
    }
    SCOPED_TRACE("round " + std::to_string(round) + ", n " + std::to_string(n));
    MinimizeResult result = minimize_checked(n, [groups](const Subset& s) {
      return std::any_of(groups.begin(), groups.end(),
                         [&](const Subset& g) { return all_of(g)(s); });
    });
    EXPECT_NE(std::find(groups.begin(), groups.end(), result.polluters), groups.end());
  }
}

}  // namespace
}  // namespace cprr

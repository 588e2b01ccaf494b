// Planning without a worker (recorder/engine/plan.h): a catalog expanded over grids and world
// sizes with stable seeds and plan positions, --filter, --exclude and --rerun-failed's labels,
// --shard's stable disjoint parts, and --shuffle's orders and seeds.
#include "recorder/engine/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace cprr {
namespace {

using ::testing::ElementsAre;

CaseInfo info(std::string name, std::vector<int> world_sizes, std::vector<GridAxis> grid = {}) {
  CaseInfo c;
  c.name = std::move(name);
  c.options.world_sizes = std::move(world_sizes);
  c.options.grid = std::move(grid);
  return c;
}

// Two cases: a plain one at two sizes, and one over a 2x2 grid at one size; 6 instances.
Catalog sample_catalog() {
  return Catalog{
      {info("healthy/noop", {2, 4}),
       info("healthy/all_reduce", {2}, {{"count", {"1", "4099"}}, {"op", {"max", "sum"}}})}};
}

std::vector<std::string> labels(const std::vector<CaseInstance>& plan) {
  std::vector<std::string> out;
  for (const CaseInstance& c : plan) out.push_back(c.label());
  return out;
}

// A plan of many labels, so that every shard of a few gets some.
std::vector<CaseInstance> many(int n) {
  Catalog catalog;
  for (int i = 0; i < n; ++i) catalog.cases.push_back(info("case/" + std::to_string(i), {2}));
  return expand(catalog, std::nullopt);
}

TEST(Plan, ExpandsEveryGridPointAndWorldSizeInCatalogOrderWithPlanPositions) {
  const std::vector<CaseInstance> plan = expand(sample_catalog(), std::nullopt);
  EXPECT_THAT(
      labels(plan),
      ElementsAre("healthy/noop@2", "healthy/noop@4", "healthy/all_reduce{count=1,op=max}@2",
                  "healthy/all_reduce{count=1,op=sum}@2", "healthy/all_reduce{count=4099,op=max}@2",
                  "healthy/all_reduce{count=4099,op=sum}@2"));
  for (std::size_t i = 0; i < plan.size(); ++i) EXPECT_EQ(plan[i].id, i + 1);
  EXPECT_EQ(plan[2].params.at("count"), "1");
  EXPECT_EQ(plan[1].world_size, 4);
}

TEST(Plan, SeedsComeFromTheLabelAloneAndFitTheStore) {
  const std::vector<CaseInstance> plan = expand(sample_catalog(), std::nullopt);
  std::set<uint64_t> seeds;
  for (const CaseInstance& c : plan) {
    EXPECT_LE(c.seed, kMaxSeed) << c.label();
    seeds.insert(c.seed);
  }
  EXPECT_EQ(seeds.size(), plan.size()) << "labels differ, so do their seeds";
  // The same label in another catalog, at another position, keeps its seed.
  const std::vector<CaseInstance> alone =
      expand(Catalog{{info("healthy/noop", {4})}}, std::nullopt);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].id, 1u);
  EXPECT_EQ(alone[0].seed, plan[1].seed);
}

TEST(Plan, FilterSearchesTheLabelAndPositionsCountWhatIsKept) {
  const std::vector<CaseInstance> plan = expand(sample_catalog(), std::regex("op=sum|@4$"));
  EXPECT_THAT(labels(plan), ElementsAre("healthy/noop@4", "healthy/all_reduce{count=1,op=sum}@2",
                                        "healthy/all_reduce{count=4099,op=sum}@2"));
  EXPECT_EQ(plan.back().id, 3u);
  EXPECT_TRUE(expand(sample_catalog(), std::regex("nothing")).empty());
}

TEST(Plan, ExcludeAndLabelsNarrowThePlanAndRenumberIt) {
  const std::vector<CaseInstance> plan = expand(sample_catalog(), std::nullopt);
  const std::vector<CaseInstance> kept = select(plan, Selection{std::regex("noop|count=1,"), {}});
  EXPECT_THAT(labels(kept), ElementsAre("healthy/all_reduce{count=4099,op=max}@2",
                                        "healthy/all_reduce{count=4099,op=sum}@2"));
  EXPECT_EQ(kept[0].id, 1u);
  EXPECT_EQ(kept[1].id, 2u);
  Selection rerun;
  rerun.labels = std::set<std::string>{"healthy/noop@4", "not/in/the/plan@2"};
  EXPECT_THAT(labels(select(plan, rerun)), ElementsAre("healthy/noop@4"));
  EXPECT_TRUE(select(plan, Selection{std::regex("."), {}}).empty());
}

TEST(Plan, ShardsAreDisjointStableAndTogetherThePlan) {
  const std::vector<CaseInstance> plan = many(60);
  std::multiset<std::string> joined;
  std::vector<std::set<std::string>> parts;
  for (uint32_t i = 1; i <= 3; ++i) {
    const std::vector<std::string> part = labels(select(plan, Selection{{}, Shard{i, 3}}));
    EXPECT_FALSE(part.empty()) << i << "/3";
    joined.insert(part.begin(), part.end());
    parts.emplace_back(part.begin(), part.end());
  }
  const std::vector<std::string> all = labels(plan);
  EXPECT_EQ(joined, std::multiset<std::string>(all.begin(), all.end()))
      << "every case in exactly one shard";
  // A case's shard depends on its label alone: a narrower plan keeps it in its shard.
  std::vector<CaseInstance> narrow = plan;
  narrow.erase(narrow.begin(), narrow.begin() + 25);
  for (const std::string& label : labels(select(narrow, Selection{{}, Shard{2, 3}}))) {
    EXPECT_TRUE(parts[1].contains(label)) << label;
  }
}

TEST(Plan, AShardKeepsThePositionsOfThePlanItIsPartOf) {
  const std::vector<CaseInstance> plan = many(30);
  std::set<uint32_t> ids;
  for (uint32_t i = 1; i <= 3; ++i) {
    for (const CaseInstance& inst : select(plan, Selection{{}, Shard{i, 3}})) {
      EXPECT_EQ(inst.id, plan[inst.id - 1].id) << inst.label();
      EXPECT_EQ(inst.label(), plan[inst.id - 1].label());
      ids.insert(inst.id);
    }
  }
  EXPECT_EQ(ids.size(), plan.size()) << "each position in one shard";
  EXPECT_EQ(*ids.rbegin(), plan.size());
}

TEST(Plan, ByTimeTheLongestCasesGoFirstOntoTheLeastLoadedShard) {
  const std::vector<CaseInstance> plan = many(6);
  std::map<std::string, double> ms;
  const std::vector<double> times{100, 90, 50, 40, 30};  // the sixth has none recorded: 50
  for (std::size_t i = 0; i < times.size(); ++i) ms[plan[i].label()] = times[i];
  const std::map<std::string, uint32_t> split = shards_by_time(plan, ms, 2);
  ASSERT_EQ(split.size(), plan.size());
  // Greedy longest-first keeps the two totals within the largest single step.
  std::array<double, 2> load{};
  for (std::size_t i = 0; i < plan.size(); ++i) {
    load[split.at(plan[i].label()) - 1] += i < times.size() ? times[i] : 50;
  }
  EXPECT_EQ(split.at(plan[0].label()), 1u) << "the longest first, onto shard 1";
  EXPECT_EQ(split.at(plan[1].label()), 2u);
  EXPECT_LE(std::abs(load[0] - load[1]), 30.0) << load[0] << " vs " << load[1];
  // The same record gives every job the same split; a shard of it is what select keeps.
  EXPECT_EQ(shards_by_time(plan, ms, 2), split);
  Selection second{{}, Shard{2, 2}};
  second.shard_of = split;
  for (const CaseInstance& inst : select(plan, second)) EXPECT_EQ(split.at(inst.label()), 2u);
  // With nothing recorded the split still covers the plan, evenly.
  const std::map<std::string, uint32_t> blind = shards_by_time(plan, {}, 3);
  std::map<uint32_t, int> per;
  for (const auto& [label, shard] : blind) ++per[shard];
  EXPECT_EQ(per, (std::map<uint32_t, int>{{1, 2}, {2, 2}, {3, 2}}));
}

TEST(Plan, ThePlanHashIsOneForEveryShardOfACommandAndChangesWithThePlan) {
  const std::vector<CaseInstance> plan = many(10);
  const std::string h = plan_hash(plan, "pool", 1);
  EXPECT_EQ(h.size(), 16u);
  EXPECT_EQ(plan_hash(plan, "pool", 1), h);
  EXPECT_NE(plan_hash(plan, "fresh", 1), h);
  EXPECT_NE(plan_hash(plan, "pool", 2), h);
  std::vector<CaseInstance> fewer = plan;
  fewer.pop_back();
  EXPECT_NE(plan_hash(fewer, "pool", 1), h);
}

TEST(Plan, ShardsParseAsIOverNAndRefuseAnythingElse) {
  const std::optional<Shard> s = parse_shard("2/4");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->index, 2u);
  EXPECT_EQ(s->count, 4u);
  EXPECT_TRUE(parse_shard("1/1").has_value());
  for (const char* bad : {"", "2", "0/3", "4/3", "1/0", "a/3", "1/3x", "/3", "1/", "-1/3"}) {
    EXPECT_FALSE(parse_shard(bad).has_value()) << bad;
  }
}

TEST(Plan, ShuffledOrdersArePermutationsFixedByTheSeedAndTheRepeat) {
  const std::vector<std::size_t> a = shuffled_order(40, 7, 0);
  std::vector<std::size_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(sorted[i], i) << "a permutation";
  EXPECT_EQ(a, shuffled_order(40, 7, 0)) << "the seed fixes the order";
  EXPECT_NE(a, shuffled_order(40, 7, 1)) << "each repeat its own order";
  EXPECT_NE(a, shuffled_order(40, 8, 0));
  EXPECT_NE(a, sorted);
  EXPECT_TRUE(shuffled_order(0, 7, 0).empty());
  EXPECT_EQ(parse_shuffle_seed("0"), 0u);
  EXPECT_EQ(parse_shuffle_seed(std::to_string(kMaxSeed)), kMaxSeed);
  for (const char* bad : {"", "-1", "x", "12x", "9007199254740992", "99999999999999999999"}) {
    EXPECT_FALSE(parse_shuffle_seed(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace cprr

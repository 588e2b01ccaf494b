// first_divergence and compare on hand-built captures: where two executions first differ, named
// by rank, kind, capture, chunk, byte and element ranges and values.
#include "analysis/divergence.h"

#include <gtest/gtest.h>

#include <cstring>

#include "analysis/compare.h"
#include "tests/analysis/analysis_support.h"

namespace cprr {
namespace {

using test::capture_of;
using test::execution;

std::string i32s(std::vector<int32_t> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

TEST(Divergence, IdenticalCapturesAgree) {
  CaseCapture a;
  a.probes = {capture_of("p", "abc")};
  a.outputs = {capture_of("out", i32s({1, 2, 3}), DType::i32)};
  const CaseCapture b = a;
  EXPECT_FALSE(first_divergence({&a, &a}, {&b, &b}).has_value());
}

TEST(Divergence, ProbesComeBeforeOutputsAndRanksInOrder) {
  CaseCapture same, probe_differs;
  same.probes = {capture_of("step0", "aaaa"), capture_of("step1", "bbbb")};
  same.outputs = {capture_of("out", "zzzz")};
  probe_differs = same;
  probe_differs.probes[1] = capture_of("step1", "bbbX");
  probe_differs.outputs[0] = capture_of("out", "zzzY");  // also differs, but later in stream order
  const auto d = first_divergence({&same, &same}, {&same, &probe_differs});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rank, 1);
  EXPECT_EQ(d->kind, "probe");
  EXPECT_EQ(d->name, "step1");
  EXPECT_EQ(d->seq, 1u);
  EXPECT_EQ(d->reason, "hash");
}

TEST(Divergence, HashMismatchNamesChunkBytesElementsAndValues) {
  // Three 64 KiB chunks of i32; element 20000 (chunk 1) differs. No raw bytes (too big): the
  // chunk bounds the bytes and elements.
  std::vector<int32_t> v(3 * kHashChunkBytes / 4, 7);
  CaseCapture e, a;
  e.outputs = {capture_of("big", i32s(v), DType::i32)};
  v[20000] = 8;
  a.outputs = {capture_of("big", i32s(v), DType::i32)};
  const auto d = first_divergence({&e}, {&a});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->chunk, 1);
  EXPECT_EQ(d->byte_begin, kHashChunkBytes);
  EXPECT_EQ(d->byte_end, 2 * kHashChunkBytes);
  EXPECT_EQ(d->elem_begin, kHashChunkBytes / 4);
  EXPECT_EQ(d->elem_end, 2 * kHashChunkBytes / 4);
  EXPECT_FALSE(d->element.has_value());

  // Small enough for raw bytes: the first differing element and both values.
  CaseCapture se, sa;
  se.outputs = {capture_of("sum", i32s({1, 2, 3, 4}), DType::i32)};
  sa.outputs = {capture_of("sum", i32s({1, 2, 5, 4}), DType::i32)};
  const auto s = first_divergence({&se}, {&sa});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->element, 2u);
  EXPECT_EQ(s->expected, "3");
  EXPECT_EQ(s->actual, "5");
  EXPECT_EQ(s->describe(),
            "rank 0 output 'sum' #0: bytes [0, 16) elements [0, 4) of i32 differ (chunk 0); first "
            "at element 2: expected 3, got 5");
}

TEST(Divergence, MissingExtraResizedAndAbsentResults) {
  CaseCapture one, two, resized;
  one.outputs = {capture_of("a", "1111")};
  two.outputs = {capture_of("a", "1111"), capture_of("b", "2222")};
  resized.outputs = {capture_of("a", "111111")};
  EXPECT_EQ(first_divergence({&two}, {&one})->reason, "missing");
  EXPECT_EQ(first_divergence({&one}, {&two})->reason, "extra");
  EXPECT_EQ(first_divergence({&one}, {&resized})->reason, "size");
  const auto none = first_divergence({&one, &one}, {&one, nullptr});
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->rank, 1);
  EXPECT_EQ(none->reason, "no result");
}

TEST(Compare, CapturesOfCompletedExecutionsThenStatus) {
  const ExecutionResult a = execution(1, Mode::fresh, ExecStatus::pass, {"x", "y"});
  const ExecutionResult same = execution(2, Mode::pool, ExecStatus::pass, {"x", "y"});
  const ExecutionResult other = execution(3, Mode::pool, ExecStatus::pass, {"x", "z"});
  EXPECT_FALSE(compare(a, same).has_value());
  ASSERT_TRUE(compare(a, other).has_value());
  EXPECT_EQ(compare(a, other)->rank, 1);
  // A crash is not comparable by captures: the statuses differ.
  ExecutionResult crashed = execution(4, Mode::pool, ExecStatus::crash, {"x", "y"});
  crashed.ranks[1].done.reset();
  const auto d = compare(a, crashed);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, "result");
  EXPECT_EQ(d->expected, "pass");
  EXPECT_EQ(d->actual, "crash");
  EXPECT_FALSE(completed(crashed));
  EXPECT_EQ(captures_of(crashed)[1], nullptr);
}

TEST(Compare, AFailedExecutionsRankWithoutAResultOnOneSideIsNoDifference) {
  // Rank 1 failed in both; rank 0, left waiting on it, was ended before reporting in one only.
  ExecutionResult fresh = execution(1, Mode::fresh, ExecStatus::fail, {"x", "y"});
  fresh.ranks[0].done.reset();
  const ExecutionResult pooled = execution(2, Mode::pool, ExecStatus::fail, {"x", "y"});
  EXPECT_FALSE(compare(fresh, pooled).has_value());
  // What both reported is still compared, and a passing execution's ranks all count.
  const ExecutionResult other = execution(3, Mode::pool, ExecStatus::fail, {"x", "z"});
  ASSERT_TRUE(compare(fresh, other).has_value());
  EXPECT_EQ(compare(fresh, other)->rank, 1);
  ExecutionResult passed = execution(4, Mode::fresh, ExecStatus::pass, {"x", "y"});
  passed.ranks[0].done.reset();
  EXPECT_EQ(compare(passed, execution(5, Mode::pool, ExecStatus::pass, {"x", "y"}))->reason,
            "no result");
}

TEST(Compare, FreshVsPoolNamesTheFirstDivergingCompletedPooledExecution) {
  const ExecutionResult fresh = execution(1, Mode::fresh, ExecStatus::pass, {"x"});
  const ExecutionResult pool_ok = execution(2, Mode::pool, ExecStatus::pass, {"x"});
  const ExecutionResult pool_crash = execution(3, Mode::pool, ExecStatus::crash, {"q"});
  const ExecutionResult pool_bad = execution(4, Mode::pool, ExecStatus::pass, {"y"});
  EXPECT_FALSE(fresh_vs_pool({&fresh, &pool_ok}).has_value());
  // The crash is judged by its status against the expectation, not as a divergence.
  EXPECT_FALSE(fresh_vs_pool({&fresh, &pool_ok, &pool_crash}).has_value());
  const auto d = fresh_vs_pool({&fresh, &pool_ok, &pool_crash, &pool_bad});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->pooled, &pool_bad);
  EXPECT_FALSE(fresh_vs_pool({&pool_bad}).has_value()) << "no fresh execution: nothing to compare";
}

}  // namespace
}  // namespace cprr

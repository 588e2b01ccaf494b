// Timeline export (cli/trace.h): a synthetic execution mapped to trace events, checked against the
// trace-event format (tests/cli/trace_support.h). Recorded and replayed traces:
// tests/commands/record_command_trace_test.cpp.
#include "cli/trace.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/cli/trace_support.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using trace_test::events;
using trace_test::json;
using trace_test::trace_problems;

// Two ranks, one stream op each and an all-reduce on each, the second rank's kernel never reached.
ExecutionResult synthetic() {
  ExecutionResult e;
  e.label = "unit/synthetic@2";
  for (int r = 0; r < 2; ++r) {
    RankResult done;
    CaseCapture& c = done.capture;
    c.allocs = {AllocRecord{0, false, 1, "buf", "device", 64, 0, 1}};
    c.ops = {OpRecord{0, 1, "kernel", "fill", {}, {1}}, OpRecord{1, 1, "collective", "all_reduce"},
             OpRecord{2, -1, "sync", "synchronize all"}};
    c.collectives = {CollectiveRecord{0, "all_reduce", 1}};
    c.ops[0].touches = {1};  // an access of unknown direction too
    c.ops[0].touch_spans = {ByteSpan{16, 16}};
    const int64_t t0 = 1'000'000 + r * 500;
    c.timeline.start_ns = t0;
    c.timeline.ops = {OpTime{t0 + 1000, t0 + 3000}, OpTime{t0 + 3000, t0 + 9000},
                      OpTime{t0 + 100, t0 + 9500}};
    if (r == 1) c.timeline.ops[0] = OpTime{};  // never reached
    c.timeline.allocs = {t0 + 10};
    e.ranks.push_back(RankReport{std::move(done)});
  }
  return e;
}

TEST(Trace, AMessageIsAnArrowFromItsSendToItsRecv) {
  ExecutionResult e;
  e.label = "unit/message@2";
  for (int r = 0; r < 2; ++r) {
    RankResult done;
    CaseCapture& c = done.capture;
    OpRecord op{0, 0, "kernel", r == 0 ? "send #0 to rank 1" : "recv #0 from rank 0"};
    op.peer = 1 - r;
    op.event = 0;
    op.epoch = 0;
    c.ops = {op};
    const int64_t t0 = 1'000'000 + r * 200;
    c.timeline.start_ns = t0;
    c.timeline.ops = {OpTime{t0 + 100, t0 + 4000}};
    e.ranks.push_back(RankReport{std::move(done)});
  }
  const json doc = json::parse(trace_json(e));
  EXPECT_THAT(trace_problems(doc), ::testing::IsEmpty());
  const auto arrows = events(doc, "s", "message");
  ASSERT_EQ(arrows.size(), 1u);
  EXPECT_EQ(arrows[0]["name"], "message #0 rank 0 -> rank 1");
  EXPECT_EQ(arrows[0]["pid"], 0) << "the send started first";
  EXPECT_EQ(events(doc, "f", "message").at(0)["pid"], 1);
  // An op named so without its peer (a user's kernel called "send #0 ...") draws nothing.
  e.ranks[0].done->capture.ops[0].peer = -1;
  EXPECT_TRUE(events(json::parse(trace_json(e)), "s", "message").empty());
}

TEST(Trace, AnExecutionBecomesRanksStreamsOpsAllocationsAndACollectiveArrow) {
  const ExecutionResult e = synthetic();
  ASSERT_TRUE(has_timeline(e));
  const json doc = json::parse(trace_json(e));
  EXPECT_THAT(trace_problems(doc), ::testing::IsEmpty());
  const auto ops = events(doc, "X");
  ASSERT_EQ(ops.size(), 5u) << "rank 1's unreached kernel has no event";
  EXPECT_EQ(ops[0]["name"], "kernel fill");
  EXPECT_EQ(ops[0]["tid"], 2) << "stream 1 is tid 2";
  EXPECT_DOUBLE_EQ(ops[0]["ts"].get<double>(), 1.0) << "microseconds from the earliest start";
  EXPECT_DOUBLE_EQ(ops[0]["dur"].get<double>(), 2.0);
  EXPECT_EQ(ops[2]["tid"], 0) << "a host wait is on the host track";
  EXPECT_EQ(ops[0]["args"]["writes"], json::array({"'buf' [0, 64)"})) << ops[0].dump();
  EXPECT_EQ(ops[0]["args"]["uses"], json::array({"'buf' [16, 32)"})) << ops[0].dump();
  EXPECT_FALSE(ops[1]["args"].contains("uses")) << ops[1].dump();
  const auto arrows = events(doc, "s", "collective");
  ASSERT_EQ(arrows.size(), 1u);
  EXPECT_EQ(arrows[0]["name"], "all_reduce #0");
  EXPECT_EQ(events(doc, "f", "collective").at(0)["pid"], 1) << "rank 1's started later";
  EXPECT_EQ(events(doc, "i", "alloc").size(), 2u);
  std::set<std::string> names;
  for (const json& m : events(doc, "M")) names.insert(m["args"].value("name", ""));
  EXPECT_TRUE(names.count("rank 0") && names.count("rank 1") && names.count("stream 1") &&
              names.count("host"));
  // The checker itself: an arrow that lost its finish, or points at no op, is caught.
  json broken = doc;
  for (json& ev : broken["traceEvents"]) {
    if (ev["ph"] == "f") ev["ph"] = "t";
  }
  EXPECT_THAT(trace_problems(broken), ::testing::Contains(HasSubstr("0 finish(es)")));
  json unbound = doc;
  for (json& ev : unbound["traceEvents"]) {
    if (ev["ph"] == "s") ev["ts"] = 500.0;
  }
  EXPECT_THAT(trace_problems(unbound), ::testing::Contains(HasSubstr("binds to no op")));
  ExecutionResult untimed = e;
  for (RankReport& r : untimed.ranks) r.done->capture.timeline = {};
  EXPECT_FALSE(has_timeline(untimed));
}

}  // namespace
}  // namespace cprr

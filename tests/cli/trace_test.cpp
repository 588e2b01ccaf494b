// Timeline export (cli/trace.h): a synthetic execution mapped to trace events, and a corpus
// case recorded with `--trace DIR` and replayed with `cpreplay --trace FILE`, each file checked
// against the trace-event format (ph/ts/dur/pid/tid present; flow ids pair up and bind to an op).
#include "cli/trace.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/record_command.h"
#include "schema/record_reader.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

const std::string kWorker = CPRR_WORKER_PATH;
const std::string kCpreplay = CPRR_CPREPLAY_PATH;

// What the trace-event format requires of `doc`, as a list of problems (empty: valid): every
// event has ph, pid and tid; every timed one a ts >= 0; complete events a dur >= 0; every flow id
// has one start and one finish (steps between), one name and category, in time order, and each
// point lies inside a complete event on its thread (so viewers bind the arrow to that op).
std::vector<std::string> trace_problems(const json& doc) {
  std::vector<std::string> out;
  if (!doc.contains("traceEvents") || !doc["traceEvents"].is_array()) return {"no traceEvents"};
  struct Span {
    double ts, dur;
  };
  std::map<std::pair<int, int>, std::vector<Span>> slices;
  std::map<uint64_t, std::vector<json>> flows;
  for (const json& e : doc["traceEvents"]) {
    if (!e.contains("ph") || !e.contains("pid") || !e.contains("tid") ||
        !e["pid"].is_number_integer() || !e["tid"].is_number_integer()) {
      out.push_back("event without ph/pid/tid: " + e.dump());
      continue;
    }
    const std::string ph = e["ph"];
    if (ph == "M") continue;
    if (!e.contains("ts") || !e["ts"].is_number() || e["ts"].get<double>() < 0) {
      out.push_back("event without a ts >= 0: " + e.dump());
      continue;
    }
    if (ph == "X") {
      if (!e.contains("dur") || e["dur"].get<double>() < 0)
        out.push_back("X without dur: " + e.dump());
      slices[{e["pid"], e["tid"]}].push_back({e["ts"], e["dur"]});
    } else if (ph == "s" || ph == "t" || ph == "f") {
      flows[e["id"].get<uint64_t>()].push_back(e);
    } else if (ph != "i") {
      out.push_back("unexpected ph " + ph);
    }
  }
  for (const auto& [id, points] : flows) {
    int starts = 0, finishes = 0;
    double last = -1;
    for (const json& p : points) {
      starts += p["ph"] == "s";
      finishes += p["ph"] == "f";
      if (p["name"] != points[0]["name"] || p["cat"] != points[0]["cat"])
        out.push_back(fmt::format("flow {} changes name or category", id));
      if (p["ts"].get<double>() < last) out.push_back(fmt::format("flow {} goes back in time", id));
      last = p["ts"];
      const double ts = p["ts"];
      bool bound = false;
      for (const Span& s : slices[{p["pid"], p["tid"]}]) bound |= s.ts <= ts && ts <= s.ts + s.dur;
      if (!bound) out.push_back(fmt::format("flow {} point at {} binds to no op", id, ts));
    }
    if (starts != 1 || finishes != 1) {
      out.push_back(fmt::format("flow {} has {} start(s) and {} finish(es)", id, starts, finishes));
    }
    if (points.front()["ph"] != "s" || points.back()["ph"] != "f")
      out.push_back(fmt::format("flow {} does not run from its start to its finish", id));
  }
  return out;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

std::vector<json> events(const json& doc, const std::string& ph, const std::string& cat = "") {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  }
  return out;
}

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

TEST(Trace, ARecordedRaceCaseAndItsReplayGiveValidTimelinesWithCollectiveAndRaceArrows) {
  const std::string dir = "/tmp/cprr-trace-test-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  RecordOptions o;
  o.worker = kWorker;
  o.backend = "cpu";
  o.db = dir + "/run.db";
  o.mode = "both";
  o.filter = "^(bug|fixed)/cp_maxlogit_race@2$";
  o.json = true;
  o.trace_dir = dir + "/traces";
  std::ostringstream out, err;
  ASSERT_EQ(run_record(o, out, err, false, false), 0) << err.str();
  EXPECT_THAT(err.str(), HasSubstr("wrote 2 trace(s) to " + o.trace_dir));
  // Only the seeded bug has a verdict; its fresh and pooled executions are traced.
  const json run = json::parse(out.str());
  int64_t bug = 0;
  for (const json& c : run["cases"]) {
    if (c["label"] == "bug/cp_maxlogit_race@2") bug = c["id"];
  }
  ASSERT_NE(bug, 0);
  std::set<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(o.trace_dir))
    files.insert(f.path().filename());
  EXPECT_EQ(files, (std::set<std::string>{fmt::format("case-{}-fresh-1.json", bug),
                                          fmt::format("case-{}-pool-1.json", bug)}));
  const RecordReader reader(o.db);
  const std::size_t ops_per_rank =
      reader.executions(bug).at(0).result.ranks.at(0).done->capture.ops.size();
  const auto check = [&](const std::string& path) {
    SCOPED_TRACE(path);
    const json doc = read_json(path);
    EXPECT_THAT(trace_problems(doc), ::testing::IsEmpty());
    EXPECT_EQ(events(doc, "X").size(), 2 * ops_per_rank) << "every op of both ranks";
    // Ops of one stream never overlap: each starts after the one before it on its track ends.
    std::map<std::pair<int, int>, double> track_end;
    for (const json& x : events(doc, "X")) {
      if (x["tid"] == 0) continue;  // the host track holds waits that span others
      double& end = track_end[{x["pid"], x["tid"]}];
      EXPECT_GE(x["ts"].get<double>() + 1e-3, end) << x.dump();
      end = x["ts"].get<double>() + x["dur"].get<double>();
    }
    EXPECT_EQ(events(doc, "s", "collective").size(), 1u) << "its one all-reduce, joined";
    const auto races = events(doc, "s", "race");
    ASSERT_FALSE(races.empty());
    EXPECT_THAT(races[0]["name"].get<std::string>(), HasSubstr("race on '"));
    EXPECT_THAT(races[0]["args"]["fix"].get<std::string>(), HasSubstr("must wait for an event"));
  };
  for (const std::string& f : files) check(o.trace_dir + "/" + f);
  // cpreplay --case N --trace FILE: the fresh replay's timeline.
  const std::string replayed = dir + "/replay.json";
  const std::string cmd = fmt::format("'{}' --db '{}' --case {} --mode fresh --json --trace '{}'",
                                      kCpreplay, o.db, bug, replayed);
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  ::pclose(p);
  EXPECT_EQ(json::parse(text)["trace"], replayed);
  check(replayed);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cprr

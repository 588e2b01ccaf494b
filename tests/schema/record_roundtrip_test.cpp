// RecordWriter -> close -> RecordReader: everything replay needs comes back exactly.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>

#include "schema/record_writer.h"
#include "schema/record_reader.h"
#include "runtime/error.h"
#include "schema/store.h"

namespace cprr {
namespace {

CaseInstance instance(uint32_t id, const std::string& name, Params params, int w) {
  CaseInstance inst;
  inst.id = id;
  inst.info.name = name;
  inst.info.options.world_sizes = {w};
  inst.info.options.expect = Expect::crash;
  inst.info.options.timeout_s = 2.5;
  inst.info.options.seeded_bug = "state_leak";
  inst.params = std::move(params);
  inst.world_size = w;
  inst.seed = kMaxSeed - id;  // the largest seeds a plan makes
  return inst;
}

Capture capture(const std::string& name, uint32_t seq, std::string raw) {
  Capture c;
  c.seq = seq;
  c.name = name;
  c.dtype = DType::i32;
  c.shape = {2, static_cast<int64_t>(raw.size() / 8)};
  c.bytes = raw.size();
  c.stream = 3;
  c.digest = hash_buffer(raw.data(), raw.size());
  c.raw = std::move(raw);
  return c;
}

ExecutionResult execution(Mode mode, uint64_t world, uint64_t position) {
  ExecutionResult r;
  r.mode = mode;
  r.world_id = world;
  r.pool_position = position;
  r.attempt = 2;
  r.status = ExecStatus::crash;
  r.summary = "rank 1 killed by signal 11 (SIGSEGV)";
  r.wall_ms = 12.5;
  RankReport ok;
  ok.done = RankResult{};
  ok.done->outcome = RankOutcome::fail;
  ok.done->error = "expectation failed";
  ok.done->capture.probes = {capture("p0", 0, std::string("\0\1\2\3\4\5\6\7", 8))};
  ok.done->capture.outputs = {capture("out", 0, std::string(4096, '\xab')),
                              capture("big", 1, std::string(70000, 'x'))};
  ok.done->capture.outputs[1].raw.clear();  // over the raw limit: not kept
  ok.done->capture.allocs = {AllocRecord{0, false, 1, "data", "device", 4096, 256, 0}};
  ok.done->capture.ops = {OpRecord{0, 2, "kernel", "fill", {1}, {1, 2}, -1}};
  ok.done->capture.collectives = {CollectiveRecord{0, "all_reduce", 0, DType::f32, 64, -1}};
  ok.stdout_tail = std::string("NCCL version\0binary", 19);
  RankReport dead;
  dead.exit = ExitInfo{-1, 11};
  dead.stderr_tail = "about to write";
  r.ranks = {ok, dead};
  return r;
}

TEST(RecordRoundTrip, EverythingReplayNeedsComesBack) {
  std::string dir = "/tmp/cprr-roundtrip-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string db = dir + "/r.db";
  const std::vector<CaseInstance> plan = {instance(1, "a/first", {{"k", "v"}}, 2),
                                          instance(2, "a/second", {}, 2),
                                          instance(3, "a/third", {{"n", "4096"}, {"m", "x y"}}, 2)};
  std::vector<int64_t> ids;
  {
    RecordWriter w(db, RunMeta{"cpu", "both", "counter", "/bin/worker", {"cprecord", "--db", db}});
    ids = w.add_cases(plan);
    w.write(execution(Mode::pool, 5, 1), ids[0]);
    w.write(execution(Mode::pool, 5, 2), ids[1]);
    w.write(execution(Mode::fresh, 6, 1), ids[2]);
    w.write(execution(Mode::pool, 5, 3), ids[2]);
    w.finish(1);
  }
  const RecordReader reader(db);
  const auto runs = reader.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].exit_code, 1);
  EXPECT_TRUE(runs[0].finished_at.has_value());
  EXPECT_EQ(runs[0].placement, "counter");
  EXPECT_EQ(runs[0].worker, "/bin/worker");

  const RecordedCase third = reader.find_case(ids[2]);
  EXPECT_EQ(third.instance.label(), plan[2].label());
  EXPECT_EQ(third.instance.seed, plan[2].seed);
  EXPECT_EQ(third.instance.info.options.expect, Expect::crash);
  EXPECT_EQ(third.instance.info.options.seeded_bug, "state_leak");
  EXPECT_DOUBLE_EQ(third.instance.info.options.timeout_s, 2.5);

  const auto execs = reader.executions(ids[2]);
  ASSERT_EQ(execs.size(), 2u);
  const ExecutionResult& fresh = execs[0].result;
  const ExecutionResult want = execution(Mode::fresh, 6, 1);
  EXPECT_EQ(fresh.mode, Mode::fresh);
  EXPECT_EQ(fresh.status, ExecStatus::crash);
  EXPECT_EQ(fresh.summary, want.summary);
  EXPECT_EQ(fresh.attempt, 2);
  ASSERT_EQ(fresh.ranks.size(), 2u);
  ASSERT_TRUE(fresh.ranks[0].done.has_value());
  EXPECT_EQ(fresh.ranks[0].done->outcome, RankOutcome::fail);
  EXPECT_EQ(fresh.ranks[0].done->error, "expectation failed");
  EXPECT_EQ(fresh.ranks[0].stdout_tail, want.ranks[0].stdout_tail);
  const CaseCapture& got = fresh.ranks[0].done->capture;
  const CaseCapture& exp = want.ranks[0].done->capture;
  ASSERT_EQ(got.probes.size(), 1u);
  ASSERT_EQ(got.outputs.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got.outputs[i].name, exp.outputs[i].name);
    EXPECT_EQ(got.outputs[i].digest, exp.outputs[i].digest);
    EXPECT_EQ(got.outputs[i].raw, exp.outputs[i].raw);
    EXPECT_EQ(got.outputs[i].shape, exp.outputs[i].shape);
    EXPECT_EQ(got.outputs[i].stream, 3);
  }
  EXPECT_EQ(got.probes[0].raw, exp.probes[0].raw);
  EXPECT_FALSE(fresh.ranks[1].done.has_value());
  ASSERT_TRUE(fresh.ranks[1].exit.has_value());
  EXPECT_EQ(fresh.ranks[1].exit->signal, 11);
  EXPECT_EQ(fresh.ranks[1].stderr_tail, "about to write");

  // The pooled execution of the third case ran after the first two in world 5.
  const auto preds = reader.predecessors(execs[1]);
  ASSERT_EQ(preds.size(), 2u);
  EXPECT_EQ(preds[0].id, ids[0]);
  EXPECT_EQ(preds[1].id, ids[1]);
  EXPECT_TRUE(reader.predecessors(execs[0]).empty());  // fresh: no predecessors
  std::filesystem::remove_all(dir);
}

// execution.started_at is when the execution was dispatched (not when it was committed), to the
// millisecond; seeds are stored as the positive numbers they are, and one above 2^53 is refused.
TEST(RecordRoundTrip, StartTimesAndSeedsAreStoredAsTheyAre) {
  std::string dir = "/tmp/cprr-roundtrip-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  {
    RecordWriter w(dir + "/r.db", RunMeta{"cpu", "pool", "best_fit", "/bin/worker", {}});
    ExecutionResult r = execution(Mode::pool, 1, 1);
    using namespace std::chrono;
    r.started_at = sys_days{year{2020} / 1 / 2} + hours{3} + minutes{4} + seconds{5} + milliseconds{678};
    w.write(r, w.add_cases({instance(1, "a/only", {}, 2)})[0]);
    CaseInstance too_big = instance(2, "a/big", {}, 2);
    too_big.seed = kMaxSeed + 1;
    EXPECT_THROW(w.add_cases({too_big}), Error);
  }
  Database db = Database::open(dir + "/r.db", Database::Mode::read_only);
  Statement st(db, "SELECT e.started_at, c.seed, typeof(c.seed) FROM execution e JOIN test_case c ON c.id = e.case_id");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.text(0), "2020-01-02T03:04:05.678Z");
  EXPECT_EQ(st.int64(1), static_cast<int64_t>(kMaxSeed - 1));
  EXPECT_EQ(st.text(2), "integer");
  std::filesystem::remove_all(dir);
}

TEST(RecordRoundTrip, AnUnfinishedRunReadsAsIncomplete) {
  std::string dir = "/tmp/cprr-roundtrip-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  {
    RecordWriter w(dir + "/r.db", RunMeta{"cpu", "pool", "best_fit", "/bin/worker", {}});
    w.write(execution(Mode::pool, 1, 1), w.add_cases({instance(1, "a/only", {}, 2)})[0]);
  }
  const RecordReader reader(dir + "/r.db");
  ASSERT_EQ(reader.runs().size(), 1u);
  EXPECT_FALSE(reader.runs()[0].finished_at.has_value());
  EXPECT_EQ(reader.executions(reader.cases()[0].id).size(), 1u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cprr

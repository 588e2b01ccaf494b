// RecordWriter -> close -> RecordReader: the run, its cases with their judgement, and every
// execution come back exactly. The logs' edge values: record_logs_roundtrip_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>

#include "runtime/error.h"
#include "runtime/host_info.h"
#include "schema/record_reader.h"
#include "schema/record_writer.h"
#include "schema/store.h"
#include "tests/schema/record_samples.h"

namespace cprr {
namespace {

using namespace cprr::samples;

TEST(RecordRoundTrip, EverythingReplayNeedsComesBack) {
  std::string dir = "/tmp/cprr-roundtrip-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string db = dir + "/r.db";
  const std::vector<CaseInstance> plan = {instance(1, "a/first", {{"k", "v"}}, 2),
                                          instance(2, "a/second", {}, 2),
                                          instance(3, "a/third", {{"n", "4096"}, {"m", "x y"}}, 2)};
  std::vector<int64_t> ids;
  {
    RecordWriter w(db, RunMeta{BackendKind::cpu,
                               {Mode::fresh, Mode::pool},
                               Placement::counter,
                               "/bin/worker",
                               {"cprecord", "--db", db}});
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
    RecordWriter w(dir + "/r.db",
                   RunMeta{BackendKind::cpu, {Mode::pool}, Placement::best_fit, "/bin/worker", {}});
    ExecutionResult r = execution(Mode::pool, 1, 1);
    using namespace std::chrono;
    r.started_at =
        sys_days{year{2020} / 1 / 2} + hours{3} + minutes{4} + seconds{5} + milliseconds{678};
    w.write(r, w.add_cases({instance(1, "a/only", {}, 2)})[0]);
    CaseInstance too_big = instance(2, "a/big", {}, 2);
    too_big.seed = kMaxSeed + 1;
    EXPECT_THROW(w.add_cases({too_big}), Error);
  }
  Database db = Database::open(dir + "/r.db", Database::Mode::read_only);
  Statement st(db,
               "SELECT e.started_at, c.seed, typeof(c.seed) FROM execution e JOIN test_case c ON "
               "c.id = e.case_id");
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
    RecordWriter w(dir + "/r.db",
                   RunMeta{BackendKind::cpu, {Mode::pool}, Placement::best_fit, "/bin/worker", {}});
    w.write(execution(Mode::pool, 1, 1), w.add_cases({instance(1, "a/only", {}, 2)})[0]);
  }
  const RecordReader reader(dir + "/r.db");
  ASSERT_EQ(reader.runs().size(), 1u);
  EXPECT_FALSE(reader.runs()[0].finished_at.has_value());
  EXPECT_EQ(reader.executions(reader.cases()[0].id).size(), 1u);
  std::filesystem::remove_all(dir);
}

// Every field of every execution comes back as the reader documents it (record_samples.h:
// as_stored): edge values of the execution row, a note, start times on both sides of the epoch.
TEST(RecordRoundTrip, EveryExecutionComesBackFieldByField) {
  using namespace std::chrono;
  TempDb db;
  const std::vector<CaseInstance> plan = {
      instance(1, "a/first", {{"k", "v"}}, 2),
      instance(2, "\xc3\xbc/second", {{"n", "na\xc3\xafve"}}, 2)};
  ExecutionResult a = execution(Mode::fresh, 0, 1);  // world 0: none started
  a.id = 77;                                         // the controller's number, not the store's
  a.status = ExecStatus::hang;
  a.as_expected = true;
  a.note = "the pooled world was replaced first";
  a.started_at = sys_days{year{1969} / 12 / 31} + hours{23} + minutes{59} + seconds{59} +
                 milliseconds{999} + microseconds{456};  // kept to the millisecond
  a.startup_ms = 150.25;
  a.symmetric_pool = "rank 0: NCCL window; rank 1: plain device memory, no NCCL window: \xc3\xbc";
  a.collectives = std::string(kCollectivesGlooStaged);
  a.rank_gpus = "0,0";
  a.devices = "gpus GPU-8f2a,GPU-11c0";
  a.master_port = 65535;
  a.ranks[0].done->reset_ms = 0.1;
  a.ranks[0].done->body_ms = 1e300;
  a.ranks[1].watchdog = WatchdogStatus{
      77, "body", 3, "all_reduce", 2, "broadcast", {"stream 1 (compute): kernel fill"}};
  ExecutionResult b = execution(Mode::pool, UINT64_MAX - 1, uint64_t{1} << 40);
  b.attempt = 1'000'000;
  b.status = ExecStatus::error;
  b.summary = "";
  b.note = "only a note";
  b.wall_ms = 0;
  b.collectives = std::string(kCollectivesNccl);
  b.rank_gpus = "3,1";
  ExecutionResult c = execution(Mode::pool, 3, 2);
  c.started_at = sys_days{year{2026} / 11 / 23} + hours{4} + minutes{20} + milliseconds{5};
  c.ranks.clear();  // nothing started
  std::vector<int64_t> ids, execs;
  {
    RecordWriter w(
        db.path(),
        RunMeta{
            BackendKind::cpu, {Mode::fresh, Mode::pool}, Placement::best_fit, "/bin/worker", {}});
    ids = w.add_cases(plan);
    execs = {w.write(a, ids[0]), w.write(b, ids[1]), w.write(c, ids[1])};
  }
  const RecordReader reader(db.path());
  const auto first = reader.executions(ids[0]);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].id, execs[0]);
  EXPECT_EQ(first[0].case_id, ids[0]);
  EXPECT_EQ(as_stored(a, execs[0], plan[0]), first[0].result);
  const auto second = reader.executions(ids[1]);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(as_stored(b, execs[1], plan[1]), second[0].result);
  EXPECT_EQ(as_stored(c, execs[2], plan[1]), second[1].result);
  EXPECT_EQ(second[0].result.summary, "only a note");
}

TEST(RecordRoundTrip, TheRunsLauncherComesBackAndLocalIsStoredAsNull) {
  TempDb db;
  RunMeta meta{BackendKind::cpu, {Mode::pool}, Placement::best_fit, "/w", {"cprecord"}, 8};
  LaunchOptions& o = meta.launch;
  o.kind = LauncherKind::srun;
  o.program = "/opt/slurm/bin/srun";
  o.hosts = {"gpu01", "gpu-\xc3\xbc"};
  o.partition = "a100";
  o.gpus_per_node = 8;
  o.extra = {"--mpi=none", ""};
  o.listen = "0.0.0.0:29500";
  o.advertise = "head-node";
  o.shared_dir = "/nfs/scratch";
  {
    RecordWriter(db.path(), meta).finish(0);
    RunMeta local = meta;
    local.launch = LaunchOptions{};
    RecordWriter(db.path(), local).finish(0);
  }
  const auto runs = RecordReader(db.path()).runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].launch, o);
  EXPECT_EQ(runs[1].launch, LaunchOptions{});
  Database raw = Database::open(db.path(), Database::Mode::read_only);
  Statement st(raw, "SELECT launcher IS NULL FROM run ORDER BY id");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.int64(0), 0);
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.int64(0), 1) << "local runs store NULL, as runs before version 9 read";
}

TEST(RecordRoundTrip, AnUnreadableLauncherRecordNamesTheRun) {
  EXPECT_THROW(launch_from_json("{\"kind\": \"torchrun\"}", 4), Error);
  try {
    launch_from_json("not json", 4);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run 4 has an unreadable launcher record"),
              std::string::npos);
  }
}

TEST(RecordRoundTrip, ARunOfABackendThisCprrDoesNotKnowIsNamedNotGuessed) {
  TempDb db;
  RecordWriter(db.path(), RunMeta{BackendKind::cpu, {Mode::pool}, Placement::best_fit, "/w", {}})
      .finish(0);
  Database::open(db.path(), Database::Mode::read_write)
      .exec("UPDATE run SET backend = 'rocm' WHERE id = 1");
  try {
    RecordReader(db.path()).runs();
    ADD_FAILURE() << "a run of an unknown backend was read as one of ours";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("run 1 has backend 'rocm'"));
  }
}

TEST(RecordRoundTrip, TheRunRowComesBack) {
  TempDb db;
  ::setenv("CPRR_ROUNDTRIP_PROBE", "x=1 \xc3\xbc", 1);
  const RunMeta meta{BackendKind::cpu,
                     {Mode::fresh, Mode::pool},
                     Placement::never_reuse,
                     "/opt/w \xc3\xbc/cpworker",
                     {"cprecord", "--filter", "a b", "", "\xc3\xbc"},
                     7};
  {
    RecordWriter w(db.path(), meta);
    w.finish(130);
    RecordWriter stopped(db.path(), meta);
    stopped.finish(1, "--fail-fast: case 3 (a \xc3\xbc@2) was not as expected");
    RunMeta shuffled = meta;
    shuffled.backend = BackendKind::cuda;
    shuffled.shuffle_seed = kMaxSeed;
    shuffled.worker_args = {"--cases", "/t/test \xc3\xbc.py", ""};
    shuffled.code = {CodeFile{"/t/test \xc3\xbc.py", "00000000000000ff"}, CodeFile{"/t/x.py", ""}};
    RecordWriter(db.path(), shuffled).finish(0);
  }
  ::unsetenv("CPRR_ROUNDTRIP_PROBE");
  const auto runs = RecordReader(db.path()).runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[2].shuffle_seed, kMaxSeed);
  EXPECT_EQ(runs[2].backend, BackendKind::cuda) << "each backend's word comes back as its value";
  EXPECT_EQ(runs[2].worker_args, (std::vector<std::string>{"--cases", "/t/test \xc3\xbc.py", ""}));
  EXPECT_TRUE(runs[0].worker_args.empty()) << "a worker binary of cases takes none";
  EXPECT_EQ(runs[2].code,
            (std::vector<CodeFile>{{"/t/test \xc3\xbc.py", "00000000000000ff"}, {"/t/x.py", ""}}));
  EXPECT_TRUE(runs[0].code.empty());
  EXPECT_FALSE(runs[1].shuffle_seed.has_value()) << "plan order";
  EXPECT_EQ(runs[1].stopped, "--fail-fast: case 3 (a \xc3\xbc@2) was not as expected");
  const RecordedRun& r = runs[0];
  EXPECT_FALSE(r.stopped.has_value()) << "ran its plan (or was interrupted: exit_code says so)";
  EXPECT_EQ(r.backend, meta.backend);
  EXPECT_EQ(r.mode, "both");
  EXPECT_EQ(r.placement, "never_reuse");
  EXPECT_EQ(r.worker, meta.worker);
  EXPECT_EQ(r.argv, meta.argv);
  EXPECT_EQ(r.exit_code, 130);
  EXPECT_TRUE(parse_iso8601_utc(r.started_at).has_value()) << r.started_at;
  ASSERT_TRUE(r.finished_at.has_value());
  EXPECT_TRUE(parse_iso8601_utc(*r.finished_at).has_value()) << *r.finished_at;
  EXPECT_EQ(r.tool_version, CPRR_VERSION);
  EXPECT_EQ(r.host, host_name());
  using Pair = std::pair<std::string, std::string>;
  EXPECT_THAT(r.libraries, ::testing::IsSupersetOf({Pair{"schema", std::to_string(kSchemaVersion)},
                                                    Pair{"protocol", "7"}, Pair{"backend", "cpu"},
                                                    Pair{"sqlite", sqlite3_libversion()}}));
  EXPECT_THAT(r.environment, ::testing::Contains(Pair{"CPRR_ROUNDTRIP_PROBE", "x=1 \xc3\xbc"}));
}

// test_case.verdict, as_expected and fresh_vs_pool: absent until the run judges its cases (a
// recorder that died first leaves them so), then exactly what judge_cases wrote, the last call
// winning; a call naming a case of another run writes nothing.
TEST(RecordRoundTrip, CaseJudgementsComeBackAndAreAbsentUntilJudged) {
  TempDb db;
  const RunMeta meta{
      BackendKind::cpu, {Mode::fresh, Mode::pool}, Placement::best_fit, "/bin/worker", {}};
  std::vector<int64_t> other, ids;
  {
    RecordWriter died(db.path(), meta);
    other = died.add_cases({instance(1, "b/unjudged", {}, 2)});
  }
  std::vector<CaseJudgement> judged = {
      {0, "nondeterministic", false, "rank 1 output 'sum' #0: element 3 differs \xe2\x9c\x93"},
      {0, std::nullopt, true, std::nullopt},
      {0, "", false, ""},  // empty text is not NULL
  };
  {
    RecordWriter w(db.path(), meta);
    ids = w.add_cases({instance(1, "a/one", {}, 2), instance(2, "a/two", {}, 2),
                       instance(3, "a/three", {}, 2), instance(4, "a/never", {}, 2)});
    for (std::size_t i = 0; i < judged.size(); ++i) judged[i].case_id = ids[i];
    w.judge_cases({CaseJudgement{ids[0], "crash", true, std::nullopt}});  // replaced below
    w.judge_cases(judged);
    EXPECT_THROW(w.judge_cases({{ids[3], "hang", false, std::nullopt},
                                {other[0], "hang", false, std::nullopt}}),
                 Error);
    w.finish(1);
  }
  const RecordReader reader(db.path());
  const auto cases = reader.cases();
  ASSERT_EQ(cases.size(), 5u);
  EXPECT_FALSE(cases[0].judgement.has_value()) << "the recorder of that run died before judging";
  for (std::size_t i = 0; i < judged.size(); ++i) {
    ASSERT_TRUE(cases[i + 1].judgement.has_value()) << i;
    EXPECT_EQ(judged[i], *cases[i + 1].judgement);
  }
  EXPECT_FALSE(cases[4].judgement.has_value()) << "the refused call must have written nothing";
  ASSERT_TRUE(reader.find_case(ids[2]).judgement.has_value());
  EXPECT_EQ(judged[2], *reader.find_case(ids[2]).judgement);
  // A query finds the cases that went wrong without a join.
  const Database raw = Database::open(db.path(), Database::Mode::read_only);
  Statement st(raw, "SELECT count(*) FROM test_case WHERE as_expected = 0");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.int64(0), 2);
}

}  // namespace
}  // namespace cprr

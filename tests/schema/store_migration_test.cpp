// Schema version 1 -> 2 (store_open.cpp: kMigrations). A version-1 file is what the cprr of version
// 1 wrote: its schema (kSchemaV1, schema.sql as that cprr had it) holding this cprr's rows less the
// columns version 2 added. Read-only, it is read as it is; read-write, it is migrated in place to
// exactly the schema a new file gets, in one transaction.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/host_info.h"
#include "schema/record_reader.h"
#include "schema/record_writer.h"
#include "schema/store.h"
#include "tests/schema/child_process.h"
#include "tests/schema/migration_support.h"
#include "tests/schema/record_samples.h"

namespace cprr {
namespace {

using namespace cprr::migration;  // NOLINT(google-build-using-namespace): older files

using namespace cprr::samples;
using ::testing::HasSubstr;

TEST(StoreMigration, AVersionOneFileIsReadAsItIsAndMigratedWhenOpenedForWriting) {
  TempDb dir;
  const std::string v2 = dir.path("v2.db"), v1 = dir.path("v1.db");
  const std::vector<CaseInstance> plan = {instance(1, "a/first", {{"k", "v"}}, 2),
                                          instance(2, "a/second", {}, 2)};
  ExecutionResult written = execution(Mode::pool, 5, 1);
  written.ranks[1].watchdog = WatchdogStatus{0, "body", 1, "all_reduce", 0, "all_reduce", {"s"}};
  // What a cpu world records, and what an older file's execution reads as (version 10).
  written.collectives = std::string(kCollectivesGloo);
  std::vector<int64_t> ids;
  int64_t exec_id = 0;
  {
    RecordWriter w(v2, kMeta);
    ids = w.add_cases(plan);
    exec_id = w.write(written, ids[0]);
    w.judge_cases({{ids[0], "crash", false, std::nullopt}});  // not in the version-1 copy
    w.finish(1);
  }
  make_v1_copy(v2, v1);
  const auto read_all_unjudged = [&](const std::string& path) {
    const RecordReader reader(path);
    ASSERT_EQ(reader.runs().size(), 1u);
    const auto cases = reader.cases();
    ASSERT_EQ(cases.size(), plan.size());
    for (std::size_t i = 0; i < plan.size(); ++i) {
      EXPECT_EQ(as_stored(plan[i]), cases[i].instance);
      EXPECT_FALSE(cases[i].judgement.has_value());
    }
    const auto execs = reader.executions(ids[0]);
    ASSERT_EQ(execs.size(), 1u);
    EXPECT_EQ(as_stored(written, exec_id, plan[0]), execs[0].result);
  };

  // Read-only: read as it is; the file stays at version 1 (a reader never writes).
  read_all_unjudged(v1);
  EXPECT_EQ(Database::open(v1, Database::Mode::read_only).schema_version(), 1);
  EXPECT_EQ(count(v1, "PRAGMA user_version"), 1);
  EXPECT_EQ(count(v1, kJudgementColumns), 0);

  // Read-write: migrated in place to exactly the schema of a new file, the data intact.
  EXPECT_EQ(Database::open(v1, Database::Mode::read_write).schema_version(), kSchemaVersion);
  EXPECT_EQ(count(v1, "PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(schema_of(v1), schema_of(v2));
  EXPECT_EQ(count(v1, "SELECT count(*) FROM sqlite_master WHERE type = 'view'"), 3)
      << "the views (version 6) are made by the migration too";
  read_all_unjudged(v1);

  // Then used as any new file: a new run judges its own cases, the old ones stay unjudged.
  {
    RecordWriter w(v1, kMeta);
    const auto more = w.add_cases({instance(1, "b/new", {}, 2)});
    w.judge_cases({{more[0], "hang", false, "rank 0 output 'x' #0 differs"}});
    w.finish(1);
  }
  const auto cases = RecordReader(v1).cases();
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_FALSE(cases[0].judgement.has_value());
  ASSERT_TRUE(cases[2].judgement.has_value());
  EXPECT_EQ(cases[2].judgement->verdict, "hang");
}

// Version 9 -> 10: a version-9 file (this cprr's, less execution.collectives and rank_gpus) reads
// both as '' while opened read_only, and gains them, empty, when opened for writing.
TEST(StoreMigration, AVersionNineFileReadsItsBackendsTransportAndGainsItsColumnsWhenMigrated) {
  TempDb dir;
  const std::string v10 = dir.path("v10.db"), v9 = dir.path("v9.db");
  const CaseInstance inst = instance(1, "a/shared_gpu", {}, 2);
  ExecutionResult written = execution(Mode::fresh, 1, 1);
  written.collectives = std::string(kCollectivesGlooStaged);
  written.rank_gpus = "0,0";
  int64_t case_id = 0, exec_id = 0;
  {
    RecordWriter w(v10, kMeta);
    case_id = w.add_cases({inst})[0];
    exec_id = w.write(written, case_id);
    w.finish(0);
  }
  // schema.sql less the two columns, and this cprr's rows less them.
  std::string sql(schema_sql());
  const std::string last = "rank_gpus     TEXT NOT NULL DEFAULT ''";
  const std::size_t from = sql.find(",\n  -- (version 10)"), to = sql.find(last);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  sql.erase(from, to + last.size() - from);
  sql = without_worker_args(sql);
  sql += "PRAGMA user_version = 9; ATTACH '" + v10 + "' AS src;";
  sql += "INSERT INTO run SELECT " + kRunColumns10 + " FROM src.run;";
  for (const char* t : {"test_case", "rank_result", "capture", "alloc_event"}) {
    sql += fmt::format("INSERT INTO {0} SELECT * FROM src.{0};", t);
  }
  sql += "INSERT INTO op SELECT " + kOpColumns13 + " FROM src.op;";
  sql +=
      fmt::format("INSERT INTO collective SELECT {0} FROM src.collective;", kCollectiveColumns12);
  sql +=
      "INSERT INTO execution SELECT id, run_id, case_id, mode, world_id, pool_position, attempt, "
      "status, as_expected, summary, started_at, wall_ms, startup_ms, symmetric_pool "
      "FROM src.execution;";
  exec_plain(v9, sql);
  // Before version 10 a cpu world's collectives went through Gloo (a cuda world's through NCCL),
  // and no GPU map was kept.
  ExecutionResult want = as_stored(written, exec_id, inst);
  want.collectives = std::string(kCollectivesGloo);
  want.rank_gpus.clear();
  const auto read = [&](const char* when) {
    SCOPED_TRACE(when);
    const auto execs = RecordReader(v9).executions(case_id);
    ASSERT_EQ(execs.size(), 1u);
    EXPECT_EQ(want, execs[0].result);
  };
  read("read-only, as it is");
  EXPECT_EQ(count(v9, "PRAGMA user_version"), 9);
  EXPECT_EQ(Database::open(v9, Database::Mode::read_write).schema_version(), kSchemaVersion);
  EXPECT_EQ(schema_of(v9), schema_of(v10));
  read("after the migration");
  EXPECT_EQ(as_stored(written, exec_id, inst), RecordReader(v10).executions(case_id)[0].result);
}

// A migration that fails part-way (here its last step: the column already exists) leaves the
// file exactly at version 1: the steps before it are rolled back with it.
TEST(StoreMigration, AFailedMigrationLeavesTheFileAsItWas) {
  TempDb dir;
  const std::string v2 = dir.path("v2.db"), v1 = dir.path("v1.db");
  {
    RecordWriter w(v2, kMeta);
    w.add_cases({instance(1, "a/only", {}, 2)});
  }
  make_v1_copy(v2, v1, "ALTER TABLE test_case ADD COLUMN fresh_vs_pool TEXT;");
  try {
    Database::open(v1, Database::Mode::read_write);
    ADD_FAILURE() << "migrated a file whose migration cannot apply";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("migrating the schema from version 1 to 2"));
    EXPECT_THAT(e.what(), HasSubstr("duplicate column name: fresh_vs_pool"));
    EXPECT_THAT(e.what(), HasSubstr(v1));
  }
  EXPECT_EQ(count(v1, "PRAGMA user_version"), 1);
  EXPECT_EQ(count(v1, kJudgementColumns), 1) << "only the column that was there before";
  EXPECT_EQ(RecordReader(v1).cases().size(), 1u);
}

// Two recorders started together on a version-1 file: one migrates, the other finds it done.
TEST(StoreMigration, TwoWritersOpeningAVersionOneFileTogetherMigrateItOnce) {
  TempDb dir;
  const std::string v2 = dir.path("v2.db"), v1 = dir.path("v1.db");
  {
    RecordWriter w(v2, kMeta);
    w.add_cases({instance(1, "a/only", {}, 2)});
  }
  make_v1_copy(v2, v1);
  StartGate gate;
  std::vector<pid_t> children;
  for (int c = 0; c < 2; ++c) {
    children.push_back(spawn([&] {
      gate.wait();
      RecordWriter w(v1, kMeta);
      w.finish(0);
    }));
  }
  gate.open();
  for (pid_t pid : children) {
    const int status = wait_status(pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  EXPECT_EQ(count(v1, "PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(count(v1, kJudgementColumns), 3);
  EXPECT_EQ(RecordReader(v1).runs().size(), 3u);
}

// Version 12 -> 13: a version-12 file's collectives (every one the world's, keyed by seq) read
// as the world's group with no peer, and keep their order and values through the table's
// rebuild; the file gains process_group, empty.
TEST(StoreMigration, AVersionTwelveFilesCollectivesAreTheWorldsAndSurviveTheRebuild) {
  TempDb dir;
  const std::string v13 = dir.path("v13.db"), v12 = dir.path("v12.db");
  const CaseInstance inst = instance(1, "a/all_reduce", {}, 2);
  ExecutionResult written = execution(Mode::fresh, 1, 1);
  for (RankReport& rep : written.ranks) {
    if (!rep.done) continue;
    rep.done->capture.collectives = {{0, "all_reduce", 0, DType::f32, 64, -1, ReduceOp::max},
                                     {1, "barrier", 1, DType::u8, 0, -1},
                                     {2, "broadcast", 0, DType::i64, 8, 1}};
  }
  int64_t case_id = 0, exec_id = 0;
  {
    RecordWriter w(v13, kMeta);
    case_id = w.add_cases({inst})[0];
    exec_id = w.write(written, case_id);
    w.finish(0);
  }
  std::string sql = without_groups(std::string(schema_sql()));
  sql += "PRAGMA user_version = 12; ATTACH '" + v13 + "' AS src;";
  sql += "INSERT INTO run SELECT " + kRunColumns16 + " FROM src.run;";
  sql += "INSERT INTO execution SELECT " + kExecutionColumns16 + " FROM src.execution;";
  for (const char* t : {"test_case", "rank_result", "capture", "alloc_event"}) {
    sql += fmt::format("INSERT INTO {0} SELECT * FROM src.{0};", t);
  }
  sql += "INSERT INTO op SELECT " + kOpColumns13 + " FROM src.op;";
  // Written in reverse: the order read back is seq's, not the rows'.
  sql += fmt::format("INSERT INTO collective SELECT {0} FROM src.collective ORDER BY seq DESC;",
                     kCollectiveColumns12);
  exec_plain(v12, sql);
  const ExecutionResult want = as_stored(written, exec_id, inst);
  const auto read = [&](const char* when) {
    SCOPED_TRACE(when);
    const auto execs = RecordReader(v12).executions(case_id);
    ASSERT_EQ(execs.size(), 1u);
    EXPECT_EQ(want, execs[0].result);
  };
  read("read-only, as it is");
  EXPECT_EQ(Database::open(v12, Database::Mode::read_write).schema_version(), kSchemaVersion);
  EXPECT_EQ(schema_of(v12), schema_of(v13));
  EXPECT_EQ(count(v12, "SELECT count(*) FROM process_group"), 0);
  read("after the migration");
}

}  // namespace
}  // namespace cprr

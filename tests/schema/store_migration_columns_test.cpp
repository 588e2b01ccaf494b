// Store migrations that add columns (store_open.cpp: kMigrations), each from a file of the version
// before: a row of the older version reads with the new column's default, and the file migrated in
// place gains it with exactly the schema a new file gets.
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

using namespace cprr::samples;
using ::testing::HasSubstr;
using namespace cprr::migration;  // NOLINT(google-build-using-namespace): older files

// Rows exactly as the previous release wrote them (schema 1): whole-second times, a seed above
// 2^63 stored as a negative INTEGER, a watchdog answer. Built literally, not by this cprr's
// writer, so a reader that only understands its own writer's forms fails here.
TEST(StoreMigration, RowsWrittenByThePreviousReleaseAreReadAndSurviveMigration) {
  TempDb dir;
  const std::string v1 = dir.path("old.db");
  exec_plain(v1, std::string(kSchemaV1) + R"(
INSERT INTO run VALUES (1, '2026-11-22T10:00:00Z', '2026-11-22T10:00:09Z', 0, '0.1.0', 'ci', 'cpu',
  'both', 'best_fit', '/bin/worker', '["cprecord"]', '{"sqlite":"3.40.1","schema":1,"protocol":2}', '{}');
INSERT INTO test_case VALUES (1, 1, 1, 'bug/global_rng', 'bug/global_rng{n=4096}@2', '{"n":"4096"}',
  2, -81985529216486896, 'pass', 0.0, 'state_leak');
INSERT INTO execution VALUES (1, 1, 1, 'fresh', 1, 1, 1, 'pass', 1, '', '2026-11-22T10:00:01Z', 12.5, 40.0);
INSERT INTO execution VALUES (2, 1, 1, 'pool', 2, 3, 1, 'hang', 0, 'hang: rank 1 never joined', '2026-11-22T10:00:02Z', 3000.0, 0.0);
INSERT INTO rank_result VALUES (1, 0, 'ok', '', NULL, NULL, '', NULL, X'', X'', 0.1, 1.0);
INSERT INTO rank_result VALUES (1, 1, 'ok', '', NULL, NULL, '', NULL, X'', X'', 0.1, 1.0);
INSERT INTO rank_result VALUES (2, 0, 'no_result', '', NULL, NULL, '',
  '{"phase":"body","entered_seq":0,"entered_kind":"all_reduce","completed_seq":-1,"completed_kind":"","running":[]}',
  X'', X'', 0.0, 0.0);
INSERT INTO rank_result VALUES (2, 1, 'no_result', '', NULL, NULL, '', NULL, X'', X'', 0.0, 0.0);
)");
  const auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    const RecordReader reader(v1);
    ASSERT_FALSE(reader.runs().empty());  // the migrating writer adds a run of its own
    const RecordedCase c = reader.find_case(1);
    EXPECT_EQ(c.instance.seed, 0xfedcba9876543210ull) << "the negative INTEGER is the u64 seed";
    const auto execs = reader.executions(1);
    ASSERT_EQ(execs.size(), 2u);
    EXPECT_EQ(iso8601_utc(execs[0].result.started_at), "2026-11-22T10:00:01.000Z");
    EXPECT_EQ(execs[1].result.status, ExecStatus::hang);
    ASSERT_TRUE(execs[1].result.ranks[0].watchdog.has_value());
    EXPECT_EQ(execs[1].result.ranks[0].watchdog->entered_kind, "all_reduce");
  };
  check("read-only, as it is");
  { RecordWriter migrate(v1, kMeta); }  // a new cprecord appending to the old file
  check("after the migration");
}

TEST(StoreMigration, AVersionTenRunReadsWithNoWorkerArgumentsAndMigratesToThem) {
  TempDb dir;
  const std::string v11 = dir.path("v11.db"), v10 = dir.path("v10.db");
  RunMeta meta = kMeta;
  meta.worker_args = {"--cases", "/tmp/test_a.py"};
  {
    RecordWriter w(v11, meta);
    w.add_cases({instance(1, "a/python", {}, 2)});
    w.finish(0);
  }
  EXPECT_EQ(RecordReader(v11).runs().at(0).worker_args, meta.worker_args);
  std::string sql = without_worker_args(std::string(schema_sql()));
  sql += "PRAGMA user_version = 10; ATTACH '" + v11 + "' AS src;";
  sql += "INSERT INTO run SELECT " + kRunColumns10 + " FROM src.run;";
  sql += "INSERT INTO test_case SELECT * FROM src.test_case;";
  exec_plain(v10, sql);
  EXPECT_TRUE(RecordReader(v10).runs().at(0).worker_args.empty());
  EXPECT_EQ(Database::open(v10, Database::Mode::read_write).schema_version(), kSchemaVersion);
  EXPECT_EQ(schema_of(v10), schema_of(v11));
  EXPECT_TRUE(RecordReader(v10).runs().at(0).worker_args.empty());
}

TEST(StoreMigration, AVersionElevenRunReadsWithNoCodeAndMigratesToIt) {
  TempDb dir;
  const std::string v12 = dir.path("v12.db"), v11 = dir.path("v11.db");
  RunMeta meta = kMeta;
  meta.worker_args = {"--cases", "/tmp/test_a.py"};
  meta.code = {CodeFile{"/tmp/test_a.py", "0123456789abcdef"}, CodeFile{"/tmp/gone.py", ""}};
  {
    RecordWriter w(v12, meta);
    w.add_cases({instance(1, "a/python", {}, 2)});
    w.finish(0);
  }
  EXPECT_EQ(RecordReader(v12).runs().at(0).code, meta.code);
  std::string sql = without_code(std::string(schema_sql()));
  sql += "PRAGMA user_version = 11; ATTACH '" + v12 + "' AS src;";
  sql += "INSERT INTO run SELECT " + kRunColumns11 + " FROM src.run;";
  sql += "INSERT INTO test_case SELECT * FROM src.test_case;";
  exec_plain(v11, sql);
  EXPECT_TRUE(RecordReader(v11).runs().at(0).code.empty());
  EXPECT_EQ(RecordReader(v11).runs().at(0).worker_args, meta.worker_args);
  EXPECT_EQ(Database::open(v11, Database::Mode::read_write).schema_version(), kSchemaVersion);
  EXPECT_EQ(schema_of(v11), schema_of(v12));
  EXPECT_TRUE(RecordReader(v11).runs().at(0).code.empty());
}

// Version 14 -> 15: an op of a version-14 file reads with no touches, and the file gains the
// columns, empty, when opened for writing; what a version-15 writer stores comes back.
TEST(StoreMigration, AVersionFourteenOpReadsWithNoTouchesAndMigratesToThem) {
  TempDb dir;
  const std::string v15 = dir.path("v15.db"), v14 = dir.path("v14.db");
  const CaseInstance inst = instance(1, "a/opaque", {}, 2);
  ExecutionResult written = execution(Mode::fresh, 1, 1);
  OpRecord opaque{0, 1, "native", "lib_call", {4}, {}, -1};
  opaque.touches = {5, 4};
  opaque.touch_spans = {{0, 16}, {8, 8}};
  written.ranks[0].done->capture.ops = {opaque};
  int64_t case_id = 0;
  {
    RecordWriter w(v15, kMeta);
    case_id = w.add_cases({inst})[0];
    w.write(written, case_id);
    w.finish(0);
  }
  const auto ops_of = [&](const std::string& path) {
    return RecordReader(path).executions(case_id).at(0).result.ranks.at(0).done->capture.ops;
  };
  EXPECT_EQ(ops_of(v15).at(0), opaque);
  std::string sql = without_touches(std::string(schema_sql()));
  sql += "PRAGMA user_version = 14; ATTACH '" + v15 + "' AS src;";
  sql += "INSERT INTO run SELECT " + kRunColumns16 + " FROM src.run;";
  sql += "INSERT INTO execution SELECT " + kExecutionColumns16 + " FROM src.execution;";
  for (const char* t :
       {"test_case", "rank_result", "capture", "alloc_event", "collective", "process_group"}) {
    sql += fmt::format("INSERT INTO {0} SELECT * FROM src.{0};", t);
  }
  sql += "INSERT INTO op SELECT " + kOpColumns14 + " FROM src.op;";
  exec_plain(v14, sql);
  OpRecord before = opaque;
  before.touches.clear();
  before.touch_spans.clear();
  EXPECT_EQ(ops_of(v14).at(0), before);
  EXPECT_EQ(Database::open(v14, Database::Mode::read_write).schema_version(), kSchemaVersion);
  EXPECT_EQ(schema_of(v14), schema_of(v15));
  EXPECT_EQ(ops_of(v14).at(0), before);
}

// Version 15 -> 16: an op of a version-15 file reads as not probed, and the file gains the
// column when opened for writing; a probed op a version-16 writer stores comes back probed.
TEST(StoreMigration, AVersionFifteenOpReadsAsNotProbedAndMigrates) {
  TempDb dir;
  const std::string v16 = dir.path("v16.db"), v15 = dir.path("v15.db");
  const CaseInstance inst = instance(1, "a/probed", {}, 2);
  ExecutionResult written = execution(Mode::fresh, 1, 1);
  OpRecord learned{0, 1, "kernel", "scale", {}, {5}, -1};
  learned.write_spans = {{0, 16}};
  learned.touches = {5};
  learned.touch_spans = {{16, 16}};
  learned.probed = true;
  written.ranks[0].done->capture.ops = {learned};
  int64_t case_id = 0;
  {
    RecordWriter w(v16, kMeta);
    case_id = w.add_cases({inst})[0];
    w.write(written, case_id);
    w.finish(0);
  }
  const auto ops_of = [&](const std::string& path) {
    return RecordReader(path).executions(case_id).at(0).result.ranks.at(0).done->capture.ops;
  };
  EXPECT_EQ(ops_of(v16).at(0), learned);
  std::string sql = without_probed(std::string(schema_sql()));
  sql += "PRAGMA user_version = 15; ATTACH '" + v16 + "' AS src;";
  sql += "INSERT INTO run SELECT " + kRunColumns16 + " FROM src.run;";
  sql += "INSERT INTO execution SELECT " + kExecutionColumns16 + " FROM src.execution;";
  for (const char* t :
       {"test_case", "rank_result", "capture", "alloc_event", "collective", "process_group"}) {
    sql += fmt::format("INSERT INTO {0} SELECT * FROM src.{0};", t);
  }
  sql += "INSERT INTO op SELECT " + kOpColumns15 + " FROM src.op;";
  exec_plain(v15, sql);
  OpRecord before = learned;
  before.probed = false;
  EXPECT_EQ(ops_of(v15).at(0), before);
  EXPECT_EQ(Database::open(v15, Database::Mode::read_write).schema_version(), kSchemaVersion);
  EXPECT_EQ(schema_of(v15), schema_of(v16));
  EXPECT_EQ(ops_of(v15).at(0), before);
}

// Version 16 -> 17: a version-16 run reads as no shard, merged into nothing, with no uid; the
// migration draws each run a uid of its own (a merge names runs by it).
TEST(StoreMigration, AVersionSixteenRunGainsAUidAndReadsAsUnsharded) {
  TempDb dir;
  const std::string v17 = dir.path("v17.db"), v16 = dir.path("v16.db");
  RunMeta meta = kMeta;
  meta.shard = "2/3";
  meta.plan_hash = "0123456789abcdef";
  for (int i = 0; i < 2; ++i) {
    RecordWriter w(v17, meta);
    w.add_cases({instance(1, "a/sharded", {}, 2)});
    w.finish(0);
  }
  const std::vector<RecordedRun> written = RecordReader(v17).runs();
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[0].shard, "2/3");
  EXPECT_EQ(written[0].plan_hash, "0123456789abcdef");
  EXPECT_EQ(written[0].uid.size(), 32u);
  EXPECT_NE(written[0].uid, written[1].uid);
  std::string sql = without_merge(std::string(schema_sql()));
  sql += "PRAGMA user_version = 16; ATTACH '" + v17 + "' AS src;";
  sql += "INSERT INTO run SELECT " + kRunColumns16 + " FROM src.run;";
  sql += "INSERT INTO test_case SELECT * FROM src.test_case;";
  exec_plain(v16, sql);
  const RecordedRun old = RecordReader(v16).runs().at(0);
  EXPECT_EQ(old.uid, "");
  EXPECT_EQ(old.shard, "");
  EXPECT_FALSE(old.merged_into.has_value());
  EXPECT_EQ(Database::open(v16, Database::Mode::read_write).schema_version(), kSchemaVersion);
  EXPECT_EQ(schema_of(v16), schema_of(v17));
  const std::vector<RecordedRun> migrated = RecordReader(v16).runs();
  EXPECT_EQ(migrated.at(0).uid.size(), 32u);
  EXPECT_NE(migrated.at(0).uid, migrated.at(1).uid);
  EXPECT_EQ(migrated.at(0).shard, "");
}

// Version 17 -> 18: an execution of a version-17 file reads with no MASTER_PORT (0); the file
// gains the column when opened for writing, and a port a version-18 writer stores comes back.
TEST(StoreMigration, AVersionSeventeenExecutionReadsWithNoMasterPortAndMigrates) {
  TempDb dir;
  const std::string v18 = dir.path("v18.db"), v17 = dir.path("v17.db");
  ExecutionResult written = execution(Mode::pool, 1, 1);
  written.devices = "cpus 0-1";
  written.master_port = 29517;
  int64_t case_id = 0;
  {
    RecordWriter w(v18, kMeta);
    case_id = w.add_cases({instance(1, "a/ported", {}, 2)})[0];
    w.write(written, case_id);
    w.finish(0);
  }
  const auto execution_of = [&](const std::string& path) {
    return RecordReader(path).executions(case_id).at(0).result;
  };
  EXPECT_EQ(execution_of(v18).master_port, 29517);
  std::string sql = without_port(std::string(schema_sql()));
  sql += "PRAGMA user_version = 17; ATTACH '" + v18 + "' AS src;";
  sql += "INSERT INTO execution SELECT " + kExecutionColumns17 + " FROM src.execution;";
  for (const char* t : {"run", "test_case", "rank_result", "capture", "alloc_event", "op",
                        "collective", "process_group"}) {
    sql += fmt::format("INSERT INTO {0} SELECT * FROM src.{0};", t);
  }
  exec_plain(v17, sql);
  EXPECT_EQ(execution_of(v17).master_port, 0);
  EXPECT_EQ(execution_of(v17).devices, "cpus 0-1");
  EXPECT_EQ(Database::open(v17, Database::Mode::read_write).schema_version(), kSchemaVersion);
  EXPECT_EQ(schema_of(v17), schema_of(v18));
  EXPECT_EQ(execution_of(v17).master_port, 0);
}

}  // namespace
}  // namespace cprr

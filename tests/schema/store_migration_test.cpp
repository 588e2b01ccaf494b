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
#include "tests/schema/record_samples.h"

namespace cprr {
namespace {

using namespace cprr::samples;
using ::testing::HasSubstr;

// schema.sql of version 1, comments left out.
constexpr const char* kSchemaV1 = R"(
CREATE TABLE run (id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, finished_at TEXT, exit_code INTEGER, tool_version TEXT NOT NULL, host TEXT NOT NULL, backend TEXT NOT NULL, mode TEXT NOT NULL, placement TEXT NOT NULL, worker TEXT NOT NULL, argv TEXT NOT NULL, libraries TEXT NOT NULL, environment TEXT NOT NULL);
CREATE TABLE test_case (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES run(id), plan_id INTEGER NOT NULL, name TEXT NOT NULL, label TEXT NOT NULL, params TEXT NOT NULL, world_size INTEGER NOT NULL, seed INTEGER NOT NULL, expect TEXT NOT NULL, timeout_s REAL NOT NULL, seeded_bug TEXT NOT NULL DEFAULT '');
CREATE TABLE execution (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES run(id), case_id INTEGER NOT NULL REFERENCES test_case(id), mode TEXT NOT NULL, world_id INTEGER NOT NULL, pool_position INTEGER NOT NULL, attempt INTEGER NOT NULL, status TEXT NOT NULL, as_expected INTEGER NOT NULL, summary TEXT NOT NULL, started_at TEXT NOT NULL, wall_ms REAL NOT NULL, startup_ms REAL NOT NULL);
CREATE INDEX execution_by_world ON execution(run_id, world_id, pool_position);
CREATE INDEX execution_by_case ON execution(case_id);
CREATE TABLE rank_result (execution_id INTEGER NOT NULL REFERENCES execution(id), rank INTEGER NOT NULL, outcome TEXT NOT NULL, error TEXT NOT NULL, signal INTEGER, exit_code INTEGER, protocol_error TEXT NOT NULL, watchdog TEXT, stdout_tail BLOB NOT NULL, stderr_tail BLOB NOT NULL, reset_ms REAL NOT NULL, body_ms REAL NOT NULL, PRIMARY KEY (execution_id, rank)) WITHOUT ROWID;
CREATE TABLE capture (execution_id INTEGER NOT NULL REFERENCES execution(id), rank INTEGER NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL, dtype TEXT NOT NULL, shape TEXT NOT NULL, bytes INTEGER NOT NULL, stream INTEGER NOT NULL, hash INTEGER NOT NULL, chunk_hashes BLOB NOT NULL, raw BLOB, PRIMARY KEY (execution_id, rank, kind, seq)) WITHOUT ROWID;
CREATE TABLE alloc_event (execution_id INTEGER NOT NULL REFERENCES execution(id), rank INTEGER NOT NULL, seq INTEGER NOT NULL, is_free INTEGER NOT NULL, buffer INTEGER NOT NULL, name TEXT NOT NULL, pool TEXT NOT NULL, bytes INTEGER NOT NULL, offset INTEGER NOT NULL, stream INTEGER NOT NULL, PRIMARY KEY (execution_id, rank, seq)) WITHOUT ROWID;
CREATE TABLE op (execution_id INTEGER NOT NULL REFERENCES execution(id), rank INTEGER NOT NULL, seq INTEGER NOT NULL, stream INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, reads TEXT NOT NULL, writes TEXT NOT NULL, event INTEGER NOT NULL, PRIMARY KEY (execution_id, rank, seq)) WITHOUT ROWID;
CREATE TABLE collective (execution_id INTEGER NOT NULL REFERENCES execution(id), rank INTEGER NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, stream INTEGER NOT NULL, dtype TEXT NOT NULL, bytes INTEGER NOT NULL, root INTEGER NOT NULL, PRIMARY KEY (execution_id, rank, seq)) WITHOUT ROWID;
PRAGMA user_version = 1;
)";

/// Runs `sql` on `path` through a plain SQLite connection: no cprr schema handling.
void exec_plain(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

/// A version-1 file at `v1` holding what `source` (written by this cprr) holds, less the judgement.
void make_v1_copy(const std::string& source, const std::string& v1, const std::string& extra = "") {
  const std::string v1_columns =
      "id, run_id, plan_id, name, label, params, world_size, seed, expect, timeout_s, seeded_bug";
  exec_plain(
      v1,
      kSchemaV1 + extra + "ATTACH '" + source + "' AS src;" +
          "INSERT INTO run SELECT id, started_at, finished_at, exit_code, tool_version, host, "
          "backend, mode, placement, worker, argv, libraries, environment FROM src.run;" +
          fmt::format("INSERT INTO test_case ({0}) SELECT {0} FROM src.test_case;", v1_columns) +
          [] {
            std::string copy;
            for (const char* t : {"rank_result", "capture", "alloc_event"}) {
              copy += fmt::format("INSERT INTO {0} SELECT * FROM src.{0};", t);
            }
            // execution less the symmetric pool, collective less the reduction (version 5).
            copy +=
                "INSERT INTO execution SELECT id, run_id, case_id, mode, world_id, "
                "pool_position, attempt, status, as_expected, summary, started_at, wall_ms, "
                "startup_ms FROM src.execution;";
            copy +=
                "INSERT INTO collective SELECT execution_id, rank, seq, kind, stream, dtype, "
                "bytes, root FROM src.collective;";
            // op less the spans version 3 added.
            copy +=
                "INSERT INTO op SELECT execution_id, rank, seq, stream, kind, name, reads, "
                "writes, event FROM src.op;";
            return copy;
          }());
}

/// Everything that makes a schema what it is, one line per column, index and foreign key (the
/// CREATE TABLE texts differ: ALTER TABLE appends to them).
std::vector<std::string> schema_of(const std::string& path) {
  const Database db = Database::open(path, Database::Mode::read_only);
  std::vector<std::string> out;
  const auto dump = [&](const char* sql, int columns) {
    Statement st(db, sql);
    while (st.step()) {
      std::string line;
      for (int c = 0; c < columns; ++c) line += (st.is_null(c) ? "NULL" : st.text(c)) + "|";
      out.push_back(line);
    }
  };
  dump(
      "SELECT t.name, t.type, t.wr, t.strict, c.cid, c.name, c.type, c.\"notnull\", "
      "c.dflt_value, c.pk FROM pragma_table_list t JOIN pragma_table_info(t.name) c "
      "WHERE t.schema = 'main' AND t.name NOT LIKE 'sqlite_%' ORDER BY t.name, c.cid",
      10);
  dump("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name", 3);
  dump(
      "SELECT m.name, f.id, f.seq, f.\"table\", f.\"from\", f.\"to\" FROM sqlite_master m "
      "JOIN pragma_foreign_key_list(m.name) f WHERE m.type = 'table' ORDER BY 1, 2, 3",
      6);
  return out;
}

int64_t count(const std::string& path, const std::string& sql) {
  const Database db = Database::open(path, Database::Mode::read_only);
  Statement st(db, sql);
  EXPECT_TRUE(st.step());
  return st.int64(0);
}

const RunMeta kMeta{"cpu", "both", "best_fit", "/bin/worker", {}};

/// `sql` less a table's last columns, from the comment of the `version` that added them to the
/// declaration `last`: schema.sql as the version before had it.
std::string without_last_columns(std::string sql, int version, const std::string& last) {
  const std::string from = fmt::format(",\n  -- (version {})", version);
  const std::size_t a = sql.find(from), b = sql.find(last);
  EXPECT_NE(a, std::string::npos);
  EXPECT_NE(b, std::string::npos);
  if (a != std::string::npos && b != std::string::npos) sql.erase(a, b + last.size() - a);
  return sql;
}

/// The collective table of versions 5 to 12, and its columns.
constexpr const char* kCollectiveTable12 =
    "CREATE TABLE collective (execution_id INTEGER NOT NULL REFERENCES execution(id), rank "
    "INTEGER NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, stream INTEGER NOT NULL, dtype "
    "TEXT NOT NULL, bytes INTEGER NOT NULL, root INTEGER NOT NULL, op TEXT NOT NULL DEFAULT '', "
    "PRIMARY KEY (execution_id, rank, seq)) WITHOUT ROWID;\n\n";
const std::string kCollectiveColumns12 =
    "execution_id, rank, seq, kind, stream, dtype, bytes, root, op";

/// schema.sql as version 16 had it: run without uid, shard, plan_hash, merged_into and
/// execution without devices (version 17).
std::string without_merge(std::string sql) {
  sql = without_last_columns(std::move(sql), 17, "merged_into   INTEGER REFERENCES run(id)");
  return without_last_columns(std::move(sql), 17, "devices       TEXT NOT NULL DEFAULT ''");
}
/// The execution table's columns before version 17.
const std::string kExecutionColumns16 =
    "id, run_id, case_id, mode, world_id, pool_position, attempt, status, as_expected, summary, "
    "started_at, wall_ms, startup_ms, symmetric_pool, collectives, rank_gpus";
/// The run table's columns before version 17.
const std::string kRunColumns16 =
    "id, started_at, finished_at, exit_code, tool_version, host, backend, mode, placement, "
    "worker, argv, libraries, environment, stopped, shuffle_seed, launcher, worker_args, code";

/// schema.sql as version 15 had it: op without probed (version 16), run without version 17's.
std::string without_probed(std::string sql) {
  return without_last_columns(without_merge(std::move(sql)), 16,
                              "probed        INTEGER NOT NULL DEFAULT 0");
}
/// The op table's columns before version 16.
const std::string kOpColumns15 =
    "execution_id, rank, seq, stream, kind, name, reads, writes, event, read_spans, write_spans, "
    "peer, epoch, moves, touches, touch_spans";

/// schema.sql as version 14 had it: op without touches and touch_spans (version 15) and probed.
std::string without_touches(std::string sql) {
  return without_last_columns(without_probed(std::move(sql)), 15,
                              "touch_spans   TEXT NOT NULL DEFAULT ''");
}
/// The op table's columns before version 15.
const std::string kOpColumns14 =
    "execution_id, rank, seq, stream, kind, name, reads, writes, event, read_spans, write_spans, "
    "peer, epoch, moves";

/// schema.sql as version 13 had it: op without moves (version 14) and touches.
std::string without_moves(std::string sql) {
  return without_last_columns(without_touches(std::move(sql)), 14,
                              "moves         INTEGER NOT NULL DEFAULT 0");
}
/// The op table's columns before version 14.
const std::string kOpColumns13 =
    "execution_id, rank, seq, stream, kind, name, reads, writes, event, read_spans, write_spans, "
    "peer, epoch";

/// schema.sql as version 12 had it: collective keyed by seq, no process_group (version 13), op
/// without moves.
std::string without_groups(std::string sql) {
  sql = without_moves(std::move(sql));
  const std::size_t a = sql.find("CREATE TABLE collective ("), b = sql.find("-- ---- Views");
  EXPECT_NE(a, std::string::npos);
  EXPECT_NE(b, std::string::npos);
  if (a != std::string::npos && b != std::string::npos) sql.replace(a, b - a, kCollectiveTable12);
  return sql;
}

/// schema.sql as version 11 had it: run without code (version 12).
std::string without_code(std::string sql) {
  return without_last_columns(without_groups(std::move(sql)), 12,
                              "code          TEXT NOT NULL DEFAULT '[]'");
}

/// schema.sql as version 10 had it: run without worker_args (version 11) and code.
std::string without_worker_args(std::string sql) {
  return without_last_columns(without_code(std::move(sql)), 11,
                              "worker_args   TEXT NOT NULL DEFAULT '[]'");
}
/// The run table's columns before version 11, and before version 12.
const std::string kRunColumns10 =
    "id, started_at, finished_at, exit_code, tool_version, host, backend, mode, placement, "
    "worker, argv, libraries, environment, stopped, shuffle_seed, launcher";
const std::string kRunColumns11 = kRunColumns10 + ", worker_args";
const std::string kJudgementColumns =
    "SELECT count(*) FROM pragma_table_info('test_case') "
    "WHERE name IN ('verdict', 'as_expected', 'fresh_vs_pool')";

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

namespace cprr {
namespace {

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
  for (const char* t : {"test_case", "rank_result", "capture", "alloc_event",
                        "collective", "process_group"}) {
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
  for (const char* t : {"test_case", "rank_result", "capture", "alloc_event",
                        "collective", "process_group"}) {
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

}  // namespace
}  // namespace cprr

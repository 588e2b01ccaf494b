#pragma once
// Older files for the store's migration tests (store_migration_test.cpp,
// store_migration_columns_test.cpp): version 1's schema, and today's schema with the columns of
// later versions taken out, each file made through a plain SQLite connection.
#include <sqlite3.h>

#include <string>
#include <vector>

#include "runtime/error.h"

namespace cprr::migration {

// schema.sql of version 1, comments left out.
inline constexpr const char* kSchemaV1 = R"(
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
inline void exec_plain(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

/// A version-1 file at `v1` holding what `source` (written by this cprr) holds, less the judgement.
inline void make_v1_copy(const std::string& source, const std::string& v1,
                         const std::string& extra = "") {
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
inline std::vector<std::string> schema_of(const std::string& path) {
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

inline int64_t count(const std::string& path, const std::string& sql) {
  const Database db = Database::open(path, Database::Mode::read_only);
  Statement st(db, sql);
  EXPECT_TRUE(st.step());
  return st.int64(0);
}

const RunMeta kMeta{
    BackendKind::cpu, {Mode::fresh, Mode::pool}, Placement::best_fit, "/bin/worker", {}};

/// `sql` less a table's last columns, from the comment of the `version` that added them to the
/// declaration `last`: schema.sql as the version before had it.
inline std::string without_last_columns(std::string sql, int version, const std::string& last) {
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

/// schema.sql as version 17 had it: execution without master_port (version 18).
inline std::string without_port(std::string sql) {
  return without_last_columns(std::move(sql), 18, "master_port   INTEGER NOT NULL DEFAULT 0");
}
/// The execution table's columns before version 18.
const std::string kExecutionColumns17 =
    "id, run_id, case_id, mode, world_id, pool_position, attempt, status, as_expected, summary, "
    "started_at, wall_ms, startup_ms, symmetric_pool, collectives, rank_gpus, devices";

/// schema.sql as version 16 had it: run without uid, shard, plan_hash, merged_into and
/// execution without devices (version 17), nor version 18's.
inline std::string without_merge(std::string sql) {
  sql = without_port(std::move(sql));
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
inline std::string without_probed(std::string sql) {
  return without_last_columns(without_merge(std::move(sql)), 16,
                              "probed        INTEGER NOT NULL DEFAULT 0");
}
/// The op table's columns before version 16.
const std::string kOpColumns15 =
    "execution_id, rank, seq, stream, kind, name, reads, writes, event, read_spans, write_spans, "
    "peer, epoch, moves, touches, touch_spans";

/// schema.sql as version 14 had it: op without touches and touch_spans (version 15) and probed.
inline std::string without_touches(std::string sql) {
  return without_last_columns(without_probed(std::move(sql)), 15,
                              "touch_spans   TEXT NOT NULL DEFAULT ''");
}
/// The op table's columns before version 15.
const std::string kOpColumns14 =
    "execution_id, rank, seq, stream, kind, name, reads, writes, event, read_spans, write_spans, "
    "peer, epoch, moves";

/// schema.sql as version 13 had it: op without moves (version 14) and touches.
inline std::string without_moves(std::string sql) {
  return without_last_columns(without_touches(std::move(sql)), 14,
                              "moves         INTEGER NOT NULL DEFAULT 0");
}
/// The op table's columns before version 14.
const std::string kOpColumns13 =
    "execution_id, rank, seq, stream, kind, name, reads, writes, event, read_spans, write_spans, "
    "peer, epoch";

/// schema.sql as version 12 had it: collective keyed by seq, no process_group (version 13), op
/// without moves.
inline std::string without_groups(std::string sql) {
  sql = without_moves(std::move(sql));
  const std::size_t a = sql.find("CREATE TABLE collective ("), b = sql.find("-- ---- Views");
  EXPECT_NE(a, std::string::npos);
  EXPECT_NE(b, std::string::npos);
  if (a != std::string::npos && b != std::string::npos) sql.replace(a, b - a, kCollectiveTable12);
  return sql;
}

/// schema.sql as version 11 had it: run without code (version 12).
inline std::string without_code(std::string sql) {
  return without_last_columns(without_groups(std::move(sql)), 12,
                              "code          TEXT NOT NULL DEFAULT '[]'");
}

/// schema.sql as version 10 had it: run without worker_args (version 11) and code.
inline std::string without_worker_args(std::string sql) {
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

}  // namespace cprr::migration

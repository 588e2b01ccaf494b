#include "schema/store_open.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iterator>
#include <memory>

#include "runtime/error.h"
#include "schema/store.h"

namespace cprr::store_open {
namespace {

/// kMigrations[v - kOldestSchemaVersion] takes a database from version v to v + 1. Each step only
/// adds (columns at the end of a table, new tables; 13 rebuilds one table to change its key), so
/// it leaves the file exactly as schema.sql creates it; the migration test compares the two.
constexpr std::string_view kMigrations[] = {
    // 1 -> 2: the case judgement (schema.sql: test_case.verdict, as_expected, fresh_vs_pool).
    "ALTER TABLE test_case ADD COLUMN verdict TEXT;"
    "ALTER TABLE test_case ADD COLUMN as_expected INTEGER;"
    "ALTER TABLE test_case ADD COLUMN fresh_vs_pool TEXT;",
    // 2 -> 3: per-access byte spans of the op log (schema.sql: op.read_spans, write_spans).
    "ALTER TABLE op ADD COLUMN read_spans TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE op ADD COLUMN write_spans TEXT NOT NULL DEFAULT '';",
    // 3 -> 4: the one-sided ops' peer and epoch (schema.sql: op.peer, op.epoch).
    "ALTER TABLE op ADD COLUMN peer INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE op ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;",
    // 4 -> 5: all_reduce's reduction in the collective log, what the symmetric pool was
    // (schema.sql: collective.op, execution.symmetric_pool).
    "ALTER TABLE collective ADD COLUMN op TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE execution ADD COLUMN symmetric_pool TEXT NOT NULL DEFAULT '';",
    // 5 -> 6: the views; migrate_schema makes them from schema.sql's views section.
    "",
    // 6 -> 7: why a run stopped early (schema.sql: run.stopped).
    "ALTER TABLE run ADD COLUMN stopped TEXT;",
    // 7 -> 8: the seed of a shuffled run's order (schema.sql: run.shuffle_seed).
    "ALTER TABLE run ADD COLUMN shuffle_seed INTEGER;",
    // 8 -> 9: how the run's ranks were started (schema.sql: run.launcher).
    "ALTER TABLE run ADD COLUMN launcher TEXT;",
    // 9 -> 10: the collectives' transport and each rank's GPU (schema.sql: execution.collectives,
    // execution.rank_gpus).
    // Until then a cuda world had a GPU per rank and NCCL, a cpu world Gloo: said so, so that a
    // replay of an older record on shared GPUs knows it runs on another transport.
    "ALTER TABLE execution ADD COLUMN collectives TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE execution ADD COLUMN rank_gpus TEXT NOT NULL DEFAULT '';"
    "UPDATE execution SET collectives = CASE WHEN world_id = 0 THEN '' "
    "WHEN (SELECT backend FROM run WHERE run.id = execution.run_id) = 'cuda' THEN 'nccl' "
    "ELSE 'gloo' END;",
    // 10 -> 11: the worker's own arguments (schema.sql: run.worker_args; Python case files).
    "ALTER TABLE run ADD COLUMN worker_args TEXT NOT NULL DEFAULT '[]';",
    // 11 -> 12: the code the cases came from, with content hashes (schema.sql: run.code).
    "ALTER TABLE run ADD COLUMN code TEXT NOT NULL DEFAULT '[]';",
    // 12 -> 13: collectives per group and point-to-point messages (schema.sql: collective's
    // position, group_id, members, peer, site, send_bytes, recv_bytes, row_bytes;
    // process_group). The key moves from seq (no longer
    // unique: each group numbers its own) to position, so the table is rebuilt; every older
    // collective was the world's, in seq order.
    "CREATE TABLE collective_v13 ("
    "  execution_id INTEGER NOT NULL REFERENCES execution(id), rank INTEGER NOT NULL,"
    "  seq INTEGER NOT NULL, kind TEXT NOT NULL, stream INTEGER NOT NULL, dtype TEXT NOT NULL,"
    "  bytes INTEGER NOT NULL, root INTEGER NOT NULL, op TEXT NOT NULL DEFAULT '',"
    "  position INTEGER NOT NULL DEFAULT 0, group_id INTEGER NOT NULL DEFAULT 0,"
    "  members INTEGER NOT NULL DEFAULT 0, peer INTEGER NOT NULL DEFAULT -1,"
    "  site TEXT NOT NULL DEFAULT '', send_bytes TEXT NOT NULL DEFAULT '',"
    "  recv_bytes TEXT NOT NULL DEFAULT '', row_bytes INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (execution_id, rank, position)) WITHOUT ROWID;"
    "INSERT INTO collective_v13 (execution_id, rank, seq, kind, stream, dtype, bytes, root, op,"
    "  position) SELECT execution_id, rank, seq, kind, stream, dtype, bytes, root, op, seq "
    "  FROM collective;"
    "DROP TABLE collective;"
    "ALTER TABLE collective_v13 RENAME TO collective;"
    "CREATE TABLE process_group ("
    "  execution_id INTEGER NOT NULL REFERENCES execution(id), rank INTEGER NOT NULL,"
    "  id INTEGER NOT NULL, ranks TEXT NOT NULL, backend TEXT NOT NULL, name TEXT NOT NULL,"
    "  PRIMARY KEY (execution_id, rank, id)) WITHOUT ROWID;",
    // 13 -> 14: ops that only move bytes (schema.sql: op.moves).
    "ALTER TABLE op ADD COLUMN moves INTEGER NOT NULL DEFAULT 0;",
    // 14 -> 15: buffers an op uses in a direction not known (schema.sql: op.touches).
    "ALTER TABLE op ADD COLUMN touches TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE op ADD COLUMN touch_spans TEXT NOT NULL DEFAULT '';",
    // 15 -> 16: ops whose directions a probe replay learned (schema.sql: op.probed).
    "ALTER TABLE op ADD COLUMN probed INTEGER NOT NULL DEFAULT 0;",
    // 16 -> 17: what merging shard databases needs (schema.sql: run.uid, shard, plan_hash,
    // merged_into; every run gets its uid, so a merge can name the runs already in a file), and
    // where an execution ran (execution.devices).
    "ALTER TABLE run ADD COLUMN uid TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE run ADD COLUMN shard TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE run ADD COLUMN plan_hash TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE run ADD COLUMN merged_into INTEGER REFERENCES run(id);"
    "UPDATE run SET uid = lower(hex(randomblob(16)));"
    "ALTER TABLE execution ADD COLUMN devices TEXT NOT NULL DEFAULT '';",
    // 17 -> 18: the MASTER_PORT an execution's ranks got (schema.sql: execution.master_port).
    "ALTER TABLE execution ADD COLUMN master_port INTEGER NOT NULL DEFAULT 0;",
};
/// The version that added the views (schema.sql's last section).
constexpr int kViewsVersion = 6;
constexpr std::string_view kViewsMarker = "-- ---- Views ----";
static_assert(std::size(kMigrations) == kSchemaVersion - kOldestSchemaVersion,
              "kSchemaVersion was bumped: write the migration from the version before");

}  // namespace

namespace {

/// Why `path` cannot be opened, from the file system itself: SQLite's own errno is that of its last
/// attempt (a read-only retry answering ENOENT), not the real cause (EACCES, EROFS, ENOTDIR). Only
/// called on the error path, where trying to create the missing file is the one honest probe.
int real_open_errno(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    return ::access(path.c_str(), R_OK | W_OK) == 0 ? 0 : errno;
  }
  if (errno != ENOENT) return errno;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  ::unlink(path.c_str());
  return 0;
}

}  // namespace

/// Throws the error for a failure while opening `path`: UsageError for what the user can fix by
/// passing another path (not a database, corrupt, unreadable/unwritable location), Error otherwise.
[[noreturn]] void throw_open_error(const OpenTarget& t, sqlite3* db, int rc,
                                   std::string_view step) {
  const std::string msg = sqlite_error_text(db, rc);
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
      CPRR_THROW_AS(UsageError,
                    "{}: not an SQLite database ({}); pass a cprr database or a new path",
                    t.named(), msg);
    case SQLITE_CORRUPT:
      CPRR_THROW_AS(
          UsageError,
          "{}: the database is corrupt ({}); restore it from a copy or pass a new path", t.named(),
          msg);
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH: {
      int err = real_open_errno(t.path);
      if (err == 0 && db != nullptr) err = sqlite3_system_errno(db);
      const std::string why = err != 0 ? fmt::format("{}: {}", msg, std::strerror(err)) : msg;
      CPRR_THROW_AS(
          UsageError,
          "{}: cannot open ({}); check the path and its permissions, or pass another path",
          t.named(), why);
    }
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      CPRR_THROW("{}: {}: locked by another process for more than {} s ({})", t.named(), step,
                 kBusyTimeoutMs / 1000, msg);
    default:
      CPRR_THROW("{}: {}: {}", t.named(), step, msg);
  }
}

/// Runs a query returning one text value (a pragma) during open; failures go through
/// throw_open_error, which is where "file is not a database" and corruption surface.
std::string open_query(sqlite3* db, const OpenTarget& t, const char* sql,
                       std::string_view step) {
  // A few statements (switching to WAL while another process switches too) answer SQLITE_BUSY
  // without consulting the busy handler: retry those until the busy timeout has passed.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (int attempt = 0;; ++attempt) {
    sqlite3_stmt* raw = nullptr;
    int rc = sqlite3_prepare_v2(db, sql, -1, &raw, nullptr);
    std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> stmt(raw, &sqlite3_finalize);
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
      const auto* text = rc == SQLITE_ROW
                             ? reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 0))
                             : nullptr;
      return text != nullptr ? std::string(text) : std::string();
    }
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline) {
      throw_open_error(t, db, rc, step);
    }
    sqlite3_sleep(std::min(1 + attempt, 20));  // milliseconds
  }
}

void open_exec(sqlite3* db, const OpenTarget& t, const std::string& sql,
               std::string_view step) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return;
  sqlite3_free(err);  // sqlite3_errmsg(db) carries the same text
  throw_open_error(t, db, rc, step);
}

SchemaState read_schema_state(sqlite3* db, const OpenTarget& t) {
  // One statement, hence one read transaction: another process creating the schema cannot commit
  // between the two reads (tables seen but version 0 would look like a foreign database).
  sqlite3_stmt* raw = nullptr;
  const char* sql =
      "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)";
  int rc = sqlite3_prepare_v2(db, sql, -1, &raw, nullptr);
  std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> stmt(raw, &sqlite3_finalize);
  if (rc != SQLITE_OK) throw_open_error(t, db, rc, "reading the schema version");
  rc = sqlite3_step(stmt.get());
  if (rc != SQLITE_ROW) throw_open_error(t, db, rc, "reading the schema version");
  SchemaState s;
  s.version = sqlite3_column_int64(stmt.get(), 0);
  s.empty = sqlite3_column_int64(stmt.get(), 1) == 0;
  return s;
}

/// Refuses a database this build cannot use. An empty database (no tables, version 0) passes:
/// the caller creates the schema or refuses it, depending on the mode.
void check_schema_state(const SchemaState& s, const OpenTarget& t) {
  if (s.version > kSchemaVersion) {
    CPRR_THROW_AS(
        UsageError,
        "{} has schema version {}, newer than this cprr (version {}): use a newer cprr", t.named(),
        s.version, kSchemaVersion);
  }
  if (s.empty) {
    if (s.version != 0) {
      CPRR_THROW_AS(
          UsageError,
          "{} has schema version {} but no tables; pass a cprr database or a new path", t.named(),
          s.version);
    }
    return;
  }
  if (s.version == 0) {
    CPRR_THROW_AS(UsageError,
                  "{}: not a cprr database (an SQLite database with tables but no cprr schema "
                  "version); pass a cprr database or a new path",
                  t.named());
  }
  if (s.version < kOldestSchemaVersion) {
    CPRR_THROW_AS(UsageError,
                  "{} has schema version {}, written by an older cprr (this cprr uses version "
                  "{}) and no migration exists: use the cprr that wrote it, or pass a new path",
                  t.named(), s.version, kSchemaVersion);
  }
}

namespace {

/// Runs `body` inside BEGIN IMMEDIATE, committing when it returns and rolling back when it throws.
/// Schema creation and migration decide under this lock: another process may be doing the same.
template <class Body>
void under_write_lock(sqlite3* db, const OpenTarget& t, std::string_view step, Body&& body) {
  open_exec(db, t, "BEGIN IMMEDIATE", step);
  try {
    body();
    open_exec(db, t, "COMMIT", step);
  } catch (...) {
    if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

}  // namespace

/// Creates the schema in an empty database, unless another process created it meanwhile.
void create_schema(sqlite3* db, const OpenTarget& t) {
  under_write_lock(db, t, "creating the schema", [&] {
    const SchemaState state = read_schema_state(db, t);
    check_schema_state(state, t);
    if (!state.empty) return;
    open_exec(db, t, std::string(schema_sql()), "creating the schema");
    open_exec(db, t, fmt::format("PRAGMA user_version = {}", kSchemaVersion),
              "setting the schema version");
  });
}

/// Brings an older database to kSchemaVersion in one transaction: a crash mid-way leaves it at its
/// old version, intact. The version is read again under the lock (another process may have
/// migrated it meanwhile).
void migrate_schema(sqlite3* db, const OpenTarget& t) {
  under_write_lock(db, t, "migrating the schema", [&] {
    const SchemaState state = read_schema_state(db, t);
    check_schema_state(state, t);
    for (int64_t v = state.version; v < kSchemaVersion; ++v) {
      open_exec(db, t, std::string(kMigrations[v - kOldestSchemaVersion]),
                fmt::format("migrating the schema from version {} to {}", v, v + 1));
    }
    if (state.version < kViewsVersion) {
      const std::string_view sql = schema_sql();
      const std::size_t at = sql.find(kViewsMarker);
      CPRR_CHECK(at != std::string_view::npos, "schema.sql lost its views marker");
      open_exec(db, t, std::string(sql.substr(at)), "creating the views");
    }
    open_exec(db, t, fmt::format("PRAGMA user_version = {}", kSchemaVersion),
              "setting the schema version");
  });
}

/// PRAGMA quick_check: damage no statement of the open touches (a page in the middle of the file)
/// would otherwise let cprecord append to a corrupt file and cpreplay read garbage. It reads the
/// whole file once (it skips the index cross-checks of integrity_check), so it costs a fraction of
/// a second per hundred MB.
void check_integrity(sqlite3* db, const OpenTarget& t) {
  const std::string answer = open_query(db, t, "PRAGMA quick_check(1)", "checking integrity");
  if (answer != "ok") {
    CPRR_THROW_AS(
        UsageError,
        "{}: the database is corrupt ({}); restore it from a copy or pass a new path", t.named(),
        answer);
  }
}

}  // namespace cprr::store_open

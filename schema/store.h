#pragma once
// The store: one SQLite file, opened through RAII handles. This header owns the schema version;
// schema/schema.sql owns the tables (and documents each one).
//
// Bump rule: any change to schema.sql that an older cprr could misread (a new table or column,
// a changed meaning) bumps kSchemaVersion, and comes with the migration from the version before
// (store_open.cpp: kMigrations) and a test that a file of that version is migrated and read right.
// A database with a newer version than this build is refused with a clear error. An older one
// (down to kOldestSchemaVersion) is migrated when opened read_write, and read as it is when opened
// read_only (a reader must not write): readers ask Database::schema_version() and treat what later
// versions added as absent. Migrations only add (columns, tables), so an old file reads right.
//
// Crash safety: WAL journal, synchronous=NORMAL (a committed transaction survives a process
// crash), explicit transactions that roll back unless committed. Concurrent writers: every write
// transaction is BEGIN IMMEDIATE and the busy timeout is long, so two cprecord processes sharing
// one file serialize their transactions and lose nothing.
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cprr {

inline constexpr int kSchemaVersion = 18;
/// The oldest version this build opens (older ones are refused, naming the cprr to use).
inline constexpr int kOldestSchemaVersion = 1;

/// The text of schema/schema.sql (generated into the build from that file).
std::string_view schema_sql();

/// `path` as an SQLite URI ("file:PATH", percent-encoded where a URI must be), with `query`
/// ("mode=ro") when not empty.
std::string sqlite_uri(const std::string& path, std::string_view query);
/// The URI that reads a finished database without writing beside it: `immutable=1` (no -shm
/// made, so a read-only folder serves), or `mode=ro` where a -wal file beside it holds commits.
std::string finished_uri(const std::string& path);

/// An open database. Move-only; closes on destruction.
class Database {
 public:
  /// read_finished: a database nothing writes any more (a merge's shards, CI's artifacts),
  /// read without writing anything beside it, in a read-only folder too (finished_uri).
  enum class Mode { read_write, read_only, read_finished };

  /// Opens `path`. read_write creates the file and the schema when missing (user_version 0 and no
  /// tables) and migrates an older schema to kSchemaVersion; read_only requires an existing file
  /// and leaves its version as it is. Throws UsageError, naming the path and what to do, for: a
  /// file that is not an SQLite database, a corrupt database, a schema version newer than
  /// kSchemaVersion or older than kOldestSchemaVersion, a missing file in read_only mode, an
  /// unwritable location.
  /// `option` names the file in every message ("--merge a.db: ..."): the option that gave it.
  static Database open(const std::string& path, Mode mode, std::string_view option = "--db");
  /// Whether `path` holds nothing yet: no file, an empty one, or an SQLite database with no tables
  /// and version 0 (what a process killed in its first open leaves). A file that is something
  /// else answers false, for open to name what it is.
  static bool is_empty_file(const std::string& path);

  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  /// The file's schema version: kSchemaVersion, except for an older file opened read_only.
  int schema_version() const { return version_; }
  /// Runs SQL without results (may contain several statements). Throws cprr::Error with the
  /// SQLite message and the path.
  void exec(std::string_view sql);
  /// Rowid of the last INSERT on this connection.
  int64_t last_insert_id() const;
  /// Rows changed by the last INSERT, UPDATE or DELETE on this connection.
  int64_t changes() const;

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_ = nullptr;
  std::string path_;
  int version_ = kSchemaVersion;
};

/// A prepared statement. Bind indexes are 1-based like SQLite's; column indexes 0-based.
class Statement {
 public:
  Statement(const Database& db, std::string_view sql);
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  ~Statement();

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view text);
  Statement& bind_blob(int index, const void* data, std::size_t bytes);
  /// Bind without copying (SQLITE_STATIC): the bytes must stay valid and unchanged until run()
  /// or reset(), which unbind them. For rows built from records that outlive the insert: the
  /// recorder binds thousands of names and chunk-hash blobs per execution.
  Statement& bind_view(int index, std::string_view text);
  Statement& bind_blob_view(int index, const void* data, std::size_t bytes);
  Statement& bind_null(int index);
  /// Binds a uint64 hash as the INTEGER with the same bit pattern.
  Statement& bind_u64(int index, uint64_t value) {
    return bind(index, static_cast<int64_t>(value));
  }

  /// Steps once: true when a row is available, false when done. Throws cprr::Error on failure
  /// (message has the SQL, the SQLite error and the database path).
  bool step();
  /// Steps to completion (for INSERT/UPDATE), then resets for the next bind.
  void run();
  /// Clears bindings and rewinds, keeping the compiled statement.
  void reset();

  int64_t int64(int column) const;
  uint64_t u64(int column) const { return static_cast<uint64_t>(int64(column)); }
  double real(int column) const;
  std::string text(int column) const;
  std::string blob(int column) const;
  bool is_null(int column) const;
  /// How many columns a row of this statement has.
  int columns() const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
  const Database* db_;
};

/// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() was called.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace cprr

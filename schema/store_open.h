#pragma once
// Opening a store file (schema/store.cpp's Database::open, internal to schema/): the errors a user
// can act on, the schema version check, creating the schema, migrating an older file, the
// integrity check. Every step names the file and what it was doing.
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace cprr::store_open {

/// How long a statement waits for another process's lock before failing.
inline constexpr int kBusyTimeoutMs = 60'000;

/// SQLite's text for `rc` on `db` (or for `rc` alone without a connection).
inline std::string sqlite_error_text(sqlite3* db, int rc) {
  return db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
}

/// The file being opened and the option that named it: every message names the file as the user
/// gave it ("--merge shard-1.db: ..."), not as --db when it was another option's.
struct OpenTarget {
  std::string path;
  std::string_view option = "--db";
  std::string named() const { return std::string(option) + " " + path; }
};

/// Throws the error for a failure while opening `path`: UsageError for what the user can fix by
/// passing another path (not a database, corrupt, unreadable/unwritable location), Error otherwise.
[[noreturn]] void throw_open_error(const OpenTarget& t, sqlite3* db, int rc,
                                   std::string_view step);
/// Runs a query returning one text value (a pragma) during open, retrying SQLITE_BUSY.
std::string open_query(sqlite3* db, const OpenTarget& t, const char* sql,
                       std::string_view step);
/// Runs statements during open; failures go through throw_open_error.
void open_exec(sqlite3* db, const OpenTarget& t, const std::string& sql, std::string_view step);

struct SchemaState {
  int64_t version = 0;
  bool empty = false;  ///< no tables at all
};
/// The file's schema version and whether it has tables, in one read transaction.
SchemaState read_schema_state(sqlite3* db, const OpenTarget& t);
/// Refuses a database this build cannot use. An empty database (no tables, version 0) passes.
void check_schema_state(const SchemaState& s, const OpenTarget& t);
/// Creates the schema in an empty database, unless another process created it meanwhile.
void create_schema(sqlite3* db, const OpenTarget& t);
/// Brings an older database to kSchemaVersion in one transaction.
void migrate_schema(sqlite3* db, const OpenTarget& t);
/// PRAGMA quick_check; a damaged file is the user's UsageError.
void check_integrity(sqlite3* db, const OpenTarget& t);

}  // namespace cprr::store_open

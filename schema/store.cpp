#include "schema/store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <utility>

#include "runtime/error.h"
#include "schema/store_open.h"

namespace cprr {

using store_open::check_integrity;
using store_open::check_schema_state;
using store_open::create_schema;
using store_open::kBusyTimeoutMs;
using store_open::migrate_schema;
using store_open::open_exec;
using store_open::open_query;
using store_open::read_schema_state;
using store_open::SchemaState;
using store_open::sqlite_error_text;
using store_open::throw_open_error;

namespace {

/// The SQL of a statement shortened for messages: one line, at most 80 characters.
std::string short_sql(std::string_view sql) {
  std::string out;
  for (char c : sql) {
    if (out.size() >= 80) {
      out += "...";
      break;
    }
    const bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

/// The file a statement's connection has open, for messages. Taken from SQLite rather than from
/// the Database object so a Statement never depends on where its Database lives.
std::string stmt_db_path(sqlite3_stmt* stmt) {
  sqlite3* db = sqlite3_db_handle(stmt);
  const char* name = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
  return name != nullptr && *name != '\0' ? name : "(temporary database)";
}

}  // namespace

// ---- Database ---------------------------------------------------------------------------------

std::string sqlite_uri(const std::string& path, std::string_view query) {
  // A URI's path may hold anything but these; a path of several leading slashes would read as
  // an authority ("file://host/...").
  std::string out = "file:";
  const std::size_t start = path.find_first_not_of('/');
  if (start != 0 && start != std::string::npos) out += '/';
  for (std::size_t i = start == std::string::npos ? 0 : start; i < path.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(path[i]);
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f) {
      out += fmt::format("%{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (!query.empty()) (out += '?') += query;
  return out;
}

std::string finished_uri(const std::string& path) {
  // A -wal file beside it holds commits not yet in the file, which `immutable` would not read
  // (a recorder that died: the merge refuses its run anyway, but must read it to say so).
  std::error_code ec;
  const bool wal = std::filesystem::exists(path + "-wal", ec);
  return sqlite_uri(path, wal ? "mode=ro" : "immutable=1");
}

bool Database::is_empty_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return true;
  if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0) {
    return !ec;
  }
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(sqlite_uri(path, "mode=ro").c_str(), &raw,
                                 SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  const std::unique_ptr<sqlite3, int (*)(sqlite3*)> owned(raw, sqlite3_close_v2);
  if (rc != SQLITE_OK) return false;
  try {
    const SchemaState state = read_schema_state(raw, {path});
    return state.empty && state.version == 0;
  } catch (const Error&) {
    return false;  // not a database, or unreadable: open says which
  }
}

Database Database::open(const std::string& path, Mode mode, std::string_view option) {
  const store_open::OpenTarget t{path, option};
  const bool writable = mode == Mode::read_write;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      CPRR_THROW_AS(UsageError, "{} is a directory; pass the path of a database file", t.named());
    }
  } else if (errno == ENOENT && !writable) {
    CPRR_THROW_AS(UsageError, "{}: no such file; pass an existing cprr database", t.named());
  }

  sqlite3* raw = nullptr;
  // Always a URI, so a database ATTACHed to this connection may be one too (finished_uri).
  const std::string uri = mode == Mode::read_finished ? finished_uri(path)
                          : writable                  ? sqlite_uri(path, "")
                                                      : sqlite_uri(path, "mode=ro");
  const int flags =
      (writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY) |
      SQLITE_OPEN_URI;
  const int rc = sqlite3_open_v2(uri.c_str(), &raw, flags, nullptr);
  // From here the handle (even a failed one) is owned by `db` and closed on every error path.
  Database db(raw, path);
  if (rc != SQLITE_OK) throw_open_error(t, raw, rc, "opening");
  // Before anything else: every later statement may meet another process's lock.
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  if (writable && sqlite3_db_readonly(raw, "main") == 1) {
    CPRR_THROW_AS(UsageError,
                  "{}: cannot open for writing (the file is read-only); check its permissions "
                  "or pass a new path",
                  t.named());
  }

  // The first read of the file: "file is not a database" and corruption are reported here.
  SchemaState state = read_schema_state(raw, t);
  check_schema_state(state, t);
  if (state.empty && !writable) {
    CPRR_THROW_AS(UsageError,
                  "{} is an empty database (no cprr schema); pass a database written by cprecord",
                  t.named());
  }
  if (!state.empty) check_integrity(raw, t);

  if (writable) {
    // Answers "wal" ("memory" for an in-memory database): nothing to check in the answer.
    open_query(raw, t, "PRAGMA journal_mode=WAL", "enabling the WAL journal");
  }
  open_exec(raw, t, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", "setting pragmas");

  if (state.empty) {
    create_schema(raw, t);  // a read-only mode never gets here: an empty file was refused above
  } else if (state.version < kSchemaVersion && writable) {
    migrate_schema(raw, t);
  } else if (state.version < kSchemaVersion) {
    db.version_ = static_cast<int>(state.version);  // read as it is: a reader must not write
  }
  return db;
}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      path_(std::move(other.path_)),
      version_(other.version_) {}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    version_ = other.version_;
  }
  return *this;
}

Database::~Database() {
  // close_v2: statements still alive keep the connection as a zombie until they are finalized.
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

void Database::exec(std::string_view sql) {
  CPRR_CHECK(db_ != nullptr, "exec on a closed database: {}", short_sql(sql));
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return;
  const std::string msg = err != nullptr ? err : sqlite_error_text(db_, rc);
  sqlite3_free(err);
  CPRR_THROW("{}: {}: {}", path_, short_sql(sql), msg);
}

int64_t Database::last_insert_id() const { return sqlite3_last_insert_rowid(db_); }

int64_t Database::changes() const { return sqlite3_changes(db_); }

// ---- Statement --------------------------------------------------------------------------------

Statement::Statement(const Database& db, std::string_view sql) : db_(&db) {
  CPRR_CHECK(db.handle() != nullptr, "prepare on a closed database: {}", short_sql(sql));
  const int rc = sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = sqlite3_errmsg(db.handle());
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    CPRR_THROW("{}: prepare {}: {}", db.path(), short_sql(sql), msg);
  }
  CPRR_CHECK(stmt_ != nullptr, "{}: prepare: no SQL statement in '{}'", db.path(), short_sql(sql));
}

Statement::Statement(Statement&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)), db_(other.db_) {}

Statement::~Statement() { sqlite3_finalize(stmt_); }

namespace {

[[noreturn]] void throw_stmt_error(sqlite3_stmt* stmt, std::string_view what, int rc) {
  sqlite3* db = sqlite3_db_handle(stmt);
  CPRR_THROW("{}: {} {}: {}", stmt_db_path(stmt), what, short_sql(sqlite3_sql(stmt)),
             sqlite_error_text(db, rc));
}

void check_bind(sqlite3_stmt* stmt, int rc, int index) {
  if (rc != SQLITE_OK) throw_stmt_error(stmt, fmt::format("bind parameter {} of", index), rc);
}

// SQLite binds NULL for a null pointer; an empty text or blob must stay a (non-NULL) empty value.
const char kEmpty[1] = {0};

}  // namespace

Statement& Statement::bind(int index, int64_t value) {
  check_bind(stmt_, sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  check_bind(stmt_, sqlite3_bind_double(stmt_, index, value), index);
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  const char* data = text.data() != nullptr ? text.data() : kEmpty;
  check_bind(stmt_,
             sqlite3_bind_text64(stmt_, index, data, text.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
             index);
  return *this;
}

Statement& Statement::bind_blob(int index, const void* data, std::size_t bytes) {
  const void* p = data != nullptr && bytes != 0 ? data : kEmpty;
  check_bind(stmt_, sqlite3_bind_blob64(stmt_, index, p, bytes, SQLITE_TRANSIENT), index);
  return *this;
}

Statement& Statement::bind_view(int index, std::string_view text) {
  const char* data = text.data() != nullptr ? text.data() : kEmpty;
  check_bind(stmt_,
             sqlite3_bind_text64(stmt_, index, data, text.size(), SQLITE_STATIC, SQLITE_UTF8),
             index);
  return *this;
}

Statement& Statement::bind_blob_view(int index, const void* data, std::size_t bytes) {
  const void* p = data != nullptr && bytes != 0 ? data : kEmpty;
  check_bind(stmt_, sqlite3_bind_blob64(stmt_, index, p, bytes, SQLITE_STATIC), index);
  return *this;
}

Statement& Statement::bind_null(int index) {
  check_bind(stmt_, sqlite3_bind_null(stmt_, index), index);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // SQLITE_BUSY only arrives here once the busy timeout has run out.
  sqlite3* db = sqlite3_db_handle(stmt_);
  const std::string msg = sqlite_error_text(db, rc);
  sqlite3_reset(stmt_);  // rewinds so the statement can be used again; bindings are kept
  CPRR_THROW("{}: {}: {}", stmt_db_path(stmt_), short_sql(sqlite3_sql(stmt_)), msg);
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);  // returns the last step's error, already reported by step()
  sqlite3_clear_bindings(stmt_);
}

namespace {

void check_column(sqlite3_stmt* stmt, int column) {
  const int n = sqlite3_data_count(stmt);
  if (column < 0 || column >= n) {
    CPRR_THROW("{}: column {} of {}: {}", stmt_db_path(stmt), column, short_sql(sqlite3_sql(stmt)),
               n == 0 ? "no current row (step() did not return true)"
                      : fmt::format("out of range (the row has {} columns)", n));
  }
}

}  // namespace

int64_t Statement::int64(int column) const {
  check_column(stmt_, column);
  return sqlite3_column_int64(stmt_, column);
}

double Statement::real(int column) const {
  check_column(stmt_, column);
  return sqlite3_column_double(stmt_, column);
}

std::string Statement::text(int column) const {
  check_column(stmt_, column);
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  const int n = sqlite3_column_bytes(stmt_, column);
  return p != nullptr ? std::string(p, static_cast<std::size_t>(n)) : std::string();
}

std::string Statement::blob(int column) const {
  check_column(stmt_, column);
  const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, column));
  const int n = sqlite3_column_bytes(stmt_, column);
  return p != nullptr ? std::string(p, static_cast<std::size_t>(n)) : std::string();
}

int Statement::columns() const { return sqlite3_column_count(stmt_); }

bool Statement::is_null(int column) const {
  check_column(stmt_, column);
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

// ---- Transaction ------------------------------------------------------------------------------

Transaction::Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  // An error inside the transaction may already have rolled it back (SQLite does so for some
  // errors); ROLLBACK only an open one, and never throw from here.
  if (!done_ && db_.handle() != nullptr && sqlite3_get_autocommit(db_.handle()) == 0) {
    sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void Transaction::commit() {
  CPRR_CHECK(!done_, "{}: transaction committed twice", db_.path());
  db_.exec("COMMIT");  // on failure the transaction stays open and the destructor rolls it back
  done_ = true;
}

}  // namespace cprr

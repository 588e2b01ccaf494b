#include "schema/store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/error.h"
#include "tests/schema/child_process.h"

namespace cprr {
namespace {

namespace fs = std::filesystem;
using samples::spawn;
using samples::StartGate;
using samples::wait_status;
using ::testing::HasSubstr;
using ::testing::Not;

/// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/cprr_store_test_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

/// The message of the cprr::Error `f` throws ("" when it throws nothing); other exceptions fail.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Same, but the error must be a UsageError.
std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  } catch (const Error& e) {
    ADD_FAILURE() << "expected a UsageError, got cprr::Error: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a UsageError, nothing was thrown";
  return "";
}

int64_t count(const Database& db, const std::string& sql) {
  Statement s(db, sql);
  EXPECT_TRUE(s.step()) << sql;
  return s.int64(0);
}

std::string pragma_text(const Database& db, const std::string& pragma) {
  Statement s(db, "PRAGMA " + pragma);
  EXPECT_TRUE(s.step()) << pragma;
  return s.text(0);
}

void insert_run(Database& db, std::string_view host) {
  Statement s(db,
              "INSERT INTO run (started_at, tool_version, host, backend, mode, placement, worker, "
              "argv, libraries, environment) VALUES ('2024-01-01T00:00:00Z', '0.1.0', ?, 'cpu', "
              "'pool', 'packed', '/w', '[]', '{}', '{}')");
  s.bind(1, host).run();
}

// ---- Round trip of every table ------------------------------------------------------------------

struct Blob {
  std::string bytes;
};
struct U64 {
  uint64_t value;
};
using Value = std::variant<std::nullptr_t, int64_t, U64, double, std::string, Blob>;

struct Table {
  std::string name;
  std::string order_by;
  std::vector<std::vector<Value>> rows;
};

void bind_value(Statement& s, int index, const Value& v) {
  if (std::holds_alternative<std::nullptr_t>(v)) s.bind_null(index);
  if (auto* i = std::get_if<int64_t>(&v)) s.bind(index, *i);
  if (auto* u = std::get_if<U64>(&v)) s.bind_u64(index, u->value);
  if (auto* d = std::get_if<double>(&v)) s.bind(index, *d);
  if (auto* t = std::get_if<std::string>(&v)) s.bind(index, std::string_view(*t));
  if (auto* b = std::get_if<Blob>(&v)) s.bind_blob(index, b->bytes.data(), b->bytes.size());
}

void expect_column(const Statement& s, int column, const Value& v, const std::string& where) {
  SCOPED_TRACE(where);
  if (std::holds_alternative<std::nullptr_t>(v)) {
    EXPECT_TRUE(s.is_null(column));
    EXPECT_EQ(s.text(column), "");  // text of NULL is ""
    return;
  }
  EXPECT_FALSE(s.is_null(column));
  if (auto* i = std::get_if<int64_t>(&v)) {
    EXPECT_EQ(s.int64(column), *i);
  }
  if (auto* u = std::get_if<U64>(&v)) {
    EXPECT_EQ(s.u64(column), u->value);
  }
  if (auto* d = std::get_if<double>(&v)) {
    EXPECT_EQ(s.real(column), *d);
  }
  if (auto* t = std::get_if<std::string>(&v)) {
    EXPECT_EQ(s.text(column), *t);
  }
  if (auto* b = std::get_if<Blob>(&v)) {
    EXPECT_EQ(s.blob(column), b->bytes);
  }
}

std::string le_u64s(std::initializer_list<uint64_t> values) {
  std::string out;
  for (uint64_t v : values) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  return out;
}

std::vector<Table> sample_tables() {
  using namespace std::string_literals;
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  return {
      {"run",
       "id",
       {{int64_t{1}, "2024-05-01T12:00:00Z"s, nullptr, nullptr, "0.1.0"s, "h\xc3\xa9te-1"s, "cpu"s,
         "pool"s, "packed"s, "/opt/cprr/cpworker"s, R"(["cprecord","--db","x.db"])"s,
         R"({"sqlite":"3.40.1"})"s, R"({"CPRR_X":"1"})"s, nullptr, nullptr, nullptr, "[]"s},
        {int64_t{2}, "2024-05-01T13:00:00Z"s, "2024-05-01T13:05:00Z"s, int64_t{0}, "0.1.0"s, ""s,
         "cuda"s, "both"s, "spread"s, "/w"s, "[]"s, "{}"s, "{}"s, "--fail-fast: case 1"s,
         int64_t{9007199254740991}, R"({"kind":"mpirun","hosts":["a"]})"s,
         R"(["--cases","/t/test_a.py"])"s}}},
      {"test_case",
       "id",
       {{int64_t{10}, int64_t{1}, int64_t{1}, "healthy/all_reduce"s,
         "healthy/all_reduce{n=16,dtype=f32}@4"s, R"({"n":16,"dtype":"f32"})"s, int64_t{4},
         U64{0xDEADBEEFCAFEF00DULL}, "pass"s, 0.0, ""s, nullptr, nullptr, nullptr},
        {int64_t{11}, int64_t{1}, int64_t{2}, "bugs/race"s, "bugs/race@2"s, "{}"s, int64_t{2},
         U64{0}, "hang"s, 2.5, "state_leak"s, "nondeterministic"s, int64_t{0},
         "rank 1 output 'y' #0: bytes [0, 16) of f32 differ \xe2\x9c\x93"s}}},
      {"execution",
       "id",
       {{int64_t{100}, int64_t{1}, int64_t{10}, "pool"s, int64_t{3}, int64_t{2}, int64_t{1},
         "fail"s, int64_t{0}, "rank 1: expected 4, got 5 at [3]"s, "2024-05-01T12:00:01Z"s, 12.75,
         0.0, "shared-memory window"s, "gloo_staged"s, "0,0,0,0"s},
        {int64_t{101}, int64_t{1}, int64_t{11}, "fresh"s, int64_t{0}, int64_t{1}, int64_t{3},
         "hang"s, int64_t{1}, ""s, "2024-05-01T12:00:02Z"s, 2000.125, 150.5, ""s, ""s, ""s}}},
      {"rank_result",
       "execution_id, rank",
       {{int64_t{100}, int64_t{0}, "ok"s, ""s, nullptr, int64_t{0}, ""s, nullptr,
         Blob{"out\0put\0"s}, Blob{""s}, 0.5, 11.25},
        {int64_t{100}, int64_t{1}, "died"s, "Segmentation fault"s, int64_t{11}, nullptr,
         "eof after 12 bytes"s, R"({"stacks":["main"]})"s, Blob{all_bytes}, Blob{"\0"s}, 0.0,
         -1.0}}},
      {"capture",
       "execution_id, rank, kind, seq",
       {{int64_t{100}, int64_t{0}, "output"s, int64_t{0}, "y"s, "f32"s, "[4]"s, int64_t{16},
         int64_t{0}, U64{0xFEDCBA9876543210ULL}, Blob{le_u64s({0x8000000000000001ULL})},
         Blob{"\0\0\x80?\0\0\0@\0\0@@\0\0\x80@"s}},
        {int64_t{100}, int64_t{0}, "probe"s, int64_t{0}, "x"s, "bf16"s, "[1024,1024]"s,
         int64_t{2 << 20}, int64_t{1}, U64{0x8000000000000000ULL},
         Blob{le_u64s({0xFFFFFFFFFFFFFFFFULL, 0, 42})}, nullptr}}},
      {"alloc_event",
       "execution_id, rank, seq",
       {{int64_t{100}, int64_t{0}, int64_t{0}, int64_t{0}, int64_t{1}, "x"s, "device"s,
         int64_t{4096}, kMax, int64_t{0}},
        {int64_t{100}, int64_t{0}, int64_t{1}, int64_t{1}, int64_t{1}, "x"s, "symmetric"s,
         int64_t{0}, int64_t{0}, kMin}}},
      {"op",
       "execution_id, rank, seq",
       {{int64_t{100}, int64_t{0}, int64_t{0}, int64_t{-1}, "host"s, "setup"s, ""s, ""s,
         int64_t{-1}, ""s, ""s, int64_t{-1}, int64_t{0}},
        {int64_t{100}, int64_t{0}, int64_t{1}, int64_t{2}, "kernel"s, "axpy"s, "1,2"s, "3"s,
         int64_t{-1}, "0+64,8+8"s, "16+16"s, int64_t{-1}, int64_t{0}},
        {int64_t{100}, int64_t{0}, int64_t{2}, int64_t{1}, "signal"s, "signal"s, ""s, ""s,
         int64_t{63}, ""s, ""s, int64_t{3}, kMax}}},
      {"collective",
       "execution_id, rank, seq",
       {{int64_t{100}, int64_t{0}, int64_t{0}, "all_reduce"s, int64_t{0}, "f32"s, int64_t{16},
         int64_t{0}, "max"s},
        {int64_t{100}, int64_t{1}, int64_t{0}, "broadcast"s, int64_t{1}, "u8"s, int64_t{0},
         int64_t{1}, ""s}}},
  };
}

TEST(StoreTest, WriteCloseReopenRoundTripsEveryColumnOfEveryTable) {
  TempDir dir;
  const std::string path = dir.file("round.db");
  const std::vector<Table> tables = sample_tables();
  {
    Database db = Database::open(path, Database::Mode::read_write);
    EXPECT_EQ(db.path(), path);
    // The test covers every table and every column the schema has.
    std::set<std::string> schema_tables;
    Statement names(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    while (names.step()) schema_tables.insert(names.text(0));
    std::set<std::string> covered;
    for (const Table& t : tables) covered.insert(t.name);
    EXPECT_EQ(schema_tables, covered) << "schema.sql changed: extend sample_tables()";

    Transaction tx(db);
    for (const Table& t : tables) {
      const int64_t columns = count(db, "SELECT count(*) FROM pragma_table_info('" + t.name + "')");
      ASSERT_EQ(static_cast<int64_t>(t.rows.at(0).size()), columns) << t.name;
      std::string sql = "INSERT INTO " + t.name + " VALUES (";
      for (int64_t c = 0; c < columns; ++c) sql += c == 0 ? "?" : ", ?";
      sql += ")";
      Statement insert(db, sql);
      for (const auto& row : t.rows) {
        for (std::size_t c = 0; c < row.size(); ++c)
          bind_value(insert, static_cast<int>(c + 1), row[c]);
        insert.run();
      }
    }
    tx.commit();
    // WITHOUT ROWID inserts leave it alone: the last rowid insert was execution 101.
    EXPECT_EQ(db.last_insert_id(), 101);
    insert_run(db, "last");
    EXPECT_EQ(db.last_insert_id(), 3);
    db.exec("DELETE FROM run WHERE id = 3");
  }

  const Database db = Database::open(path, Database::Mode::read_only);
  EXPECT_EQ(count(db, "PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(pragma_text(db, "journal_mode"), "wal");
  EXPECT_EQ(count(db, "PRAGMA foreign_keys"), 1);
  for (const Table& t : tables) {
    Statement select(db, "SELECT * FROM " + t.name + " ORDER BY " + t.order_by);
    std::size_t r = 0;
    for (; select.step(); ++r) {
      ASSERT_LT(r, t.rows.size()) << t.name;
      for (std::size_t c = 0; c < t.rows[r].size(); ++c) {
        expect_column(select, static_cast<int>(c), t.rows[r][c],
                      t.name + " row " + std::to_string(r) + " column " + std::to_string(c));
      }
    }
    EXPECT_EQ(r, t.rows.size()) << t.name;
  }
  // Hashes are INTEGER columns holding the bit pattern, not text or real.
  EXPECT_EQ(pragma_text(db, "main.user_version"), std::to_string(kSchemaVersion));
  Statement types(db, "SELECT typeof(hash), typeof(chunk_hashes) FROM capture");
  ASSERT_TRUE(types.step());
  EXPECT_EQ(types.text(0), "integer");
  EXPECT_EQ(types.text(1), "blob");
}

TEST(StoreTest, StatementErrorsNameTheSqlAndThePathAndLeaveItReusable) {
  TempDir dir;
  const std::string path = dir.file("errors.db");
  Database db = Database::open(path, Database::Mode::read_write);
  insert_run(db, "a");
  Statement dup(db,
                "INSERT INTO run (id, started_at, tool_version, host, backend, mode, placement, "
                "worker, argv, libraries, environment) VALUES (?, '', '', '', '', '', '', '', '', "
                "'', '')");
  const std::string msg = error_of([&] { dup.bind(1, int64_t{1}).run(); });
  EXPECT_THAT(msg, HasSubstr("UNIQUE constraint failed"));
  EXPECT_THAT(msg, HasSubstr("INSERT INTO run"));
  EXPECT_THAT(msg, HasSubstr(path));
  dup.reset();
  dup.bind(1, int64_t{2}).run();  // the same statement works again
  EXPECT_EQ(count(db, "SELECT count(*) FROM run"), 2);

  // Foreign keys are enforced.
  Statement orphan(db,
                   "INSERT INTO test_case (run_id, plan_id, name, label, params, world_size, seed, "
                   "expect, timeout_s) VALUES (99, 1, 'n', 'l', '{}', 1, 0, 'pass', 0)");
  EXPECT_THAT(error_of([&] { orphan.run(); }), HasSubstr("FOREIGN KEY constraint failed"));

  EXPECT_THAT(error_of([&] { Statement bad(db, "SELECT nope FROM run"); }),
              HasSubstr("no such column: nope"));
  EXPECT_THAT(error_of([&] { db.exec("INSERT INTO nowhere VALUES (1)"); }),
              HasSubstr("no such table: nowhere"));
  Statement no_row(db, "SELECT id FROM run WHERE id = 42");
  EXPECT_FALSE(no_row.step());
  EXPECT_THAT(error_of([&] { (void)no_row.int64(0); }), HasSubstr("no current row"));
}

// ---- Refused files ------------------------------------------------------------------------------

TEST(StoreTest, NewerSchemaVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.file("newer.db");
  Database::open(path, Database::Mode::read_write)
      .exec(fmt::format("PRAGMA user_version = {}", kSchemaVersion + 1));
  for (auto mode : {Database::Mode::read_write, Database::Mode::read_only}) {
    const std::string msg = usage_error_of([&] { Database::open(path, mode); });
    EXPECT_THAT(msg, HasSubstr("newer"));
    EXPECT_THAT(msg, HasSubstr(path));
    EXPECT_THAT(msg, HasSubstr(fmt::format("version {}", kSchemaVersion + 1)));
    EXPECT_THAT(msg, Not(HasSubstr("store.cpp"))) << "a UsageError carries no source location";
  }
}

TEST(StoreTest, SqliteDatabaseWithoutCprrSchemaIsRefused) {
  TempDir dir;
  const std::string path = dir.file("other.db");
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE foo (x); INSERT INTO foo VALUES (1)", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  const std::string msg = usage_error_of([&] { Database::open(path, Database::Mode::read_write); });
  EXPECT_THAT(msg, HasSubstr("not a cprr database"));
  EXPECT_THAT(msg, HasSubstr(path));
}

TEST(StoreTest, NonDatabaseFilesAreRefusedAndLeftUntouched) {
  TempDir dir;
  std::string random_bytes(8192, '\0');
  std::mt19937 rng(7);
  for (char& c : random_bytes) c = static_cast<char>(rng());
  const std::vector<std::pair<std::string, std::string>> files = {
      {"notes.txt", "These are my notes, not a database.\nLine two.\n"},
      {"random.bin", random_bytes},
  };
  for (const auto& [name, contents] : files) {
    SCOPED_TRACE(name);
    const std::string path = dir.file(name);
    std::ofstream(path, std::ios::binary) << contents;
    for (auto mode : {Database::Mode::read_write, Database::Mode::read_only}) {
      const std::string msg = usage_error_of([&] { Database::open(path, mode); });
      EXPECT_THAT(msg, HasSubstr("not an SQLite database"));
      EXPECT_THAT(msg, HasSubstr(path));
    }
    std::ifstream in(path, std::ios::binary);
    const std::string after((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(after, contents) << "opening must not modify a file that is not a database";
    EXPECT_FALSE(fs::exists(path + "-wal"));
  }
}

TEST(StoreTest, CorruptDatabaseGivesAClearErrorNotACrash) {
  TempDir dir;
  const std::string path = dir.file("corrupt.db");
  // Two ways to damage a valid database with some data: everything after page 1, and a slice in
  // the middle of the file.
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "page 2 onwards" : "middle slice");
    fs::remove(path);
    {
      Database db = Database::open(path, Database::Mode::read_write);
      Transaction tx(db);
      for (int i = 0; i < 300; ++i)
        insert_run(db, std::string(200, static_cast<char>('a' + i % 26)));
      tx.commit();
    }
    ASSERT_FALSE(fs::exists(path + "-wal")) << "the last close checkpoints into the main file";
    const auto size = static_cast<std::size_t>(fs::file_size(path));
    ASSERT_GT(size, 16u * 4096u);
    const std::size_t begin = variant == 0 ? 4096 : size / 3;
    const std::size_t end = variant == 0 ? size : 2 * size / 3;
    std::string garbage(end - begin, '\0');
    std::mt19937 rng(1234 + variant);
    for (char& c : garbage) c = static_cast<char>(rng());
    {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(begin));
      f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
    }
    for (auto mode : {Database::Mode::read_only, Database::Mode::read_write}) {
      const std::string msg = error_of([&] {
        Database db = Database::open(path, mode);
        for (const char* table : {"run", "test_case", "execution", "rank_result", "capture",
                                  "alloc_event", "op", "collective"}) {
          Statement s(db, std::string("SELECT * FROM ") + table);
          while (s.step()) (void)s.text(0);
        }
      });
      EXPECT_FALSE(msg.empty()) << "reading a damaged database raised no error";
      EXPECT_TRUE(msg.find("corrupt") != std::string::npos ||
                  msg.find("malformed") != std::string::npos)
          << msg;
      EXPECT_THAT(msg, HasSubstr(path));
    }
  }
}

// Damage that no statement of the open itself touches (a slice in the middle of the file) must
// still be refused at open: cprecord would otherwise append to the file silently and cpreplay read
// garbage. Only the open is called here, no table is read.
TEST(StoreTest, OpenRunsQuickCheckAndRefusesADatabaseCorruptedMidFile) {
  TempDir dir;
  const std::string path = dir.file("mid.db");
  {
    Database db = Database::open(path, Database::Mode::read_write);
    Transaction tx(db);
    for (int i = 0; i < 300; ++i) insert_run(db, std::string(200, static_cast<char>('a' + i % 26)));
    tx.commit();
  }
  const auto size = static_cast<std::size_t>(fs::file_size(path));
  ASSERT_GT(size, 16u * 4096u);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2 / 4096 * 4096));  // a b-tree page's header
    const std::string garbage(1000, '\xa5');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  for (auto mode : {Database::Mode::read_only, Database::Mode::read_write}) {
    const std::string msg = usage_error_of([&] { Database::open(path, mode); });
    EXPECT_THAT(msg, HasSubstr("corrupt"));
    EXPECT_THAT(msg, HasSubstr(path));
    EXPECT_THAT(msg, HasSubstr("restore it from a copy or pass a new path"));
  }
}

TEST(StoreTest, ReadOnlyOnAMissingFileIsAUsageErrorAndCreatesNothing) {
  TempDir dir;
  const std::string path = dir.file("missing.db");
  const std::string msg = usage_error_of([&] { Database::open(path, Database::Mode::read_only); });
  EXPECT_THAT(msg, HasSubstr("no such file"));
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_FALSE(fs::exists(path));
}

TEST(StoreTest, EmptyFileIsCreatedIntoButNotReadAsADatabase) {
  TempDir dir;
  const std::string path = dir.file("empty.db");
  std::ofstream(path).close();  // 0 bytes, e.g. from mktemp
  EXPECT_THAT(usage_error_of([&] { Database::open(path, Database::Mode::read_only); }),
              HasSubstr("empty database"));
  {
    Database db = Database::open(path, Database::Mode::read_write);
    EXPECT_EQ(count(db, "PRAGMA user_version"), kSchemaVersion);
  }
  EXPECT_NO_THROW(Database::open(path, Database::Mode::read_only));
}

TEST(StoreTest, UnusableLocationsNameThePath) {
  TempDir dir;
  const std::string nested = dir.file("no/such/dir/x.db");
  std::string msg = usage_error_of([&] { Database::open(nested, Database::Mode::read_write); });
  EXPECT_THAT(msg, HasSubstr(nested));
  EXPECT_THAT(msg, HasSubstr("cannot open"));

  // The reason is the file system's, not SQLite's last retry (which says "No such file or
  // directory"): sysfs refuses new files to root too, with EACCES, or EROFS where it is mounted
  // read-only (containers). The expected text is what creating the file really answers.
  const char* sysfs_file = "/sys/kernel/cprr.db";
  const int fd = ::open(sysfs_file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno != ENOENT) {
    const std::string why = std::strerror(errno);
    msg = usage_error_of([&] { Database::open(sysfs_file, Database::Mode::read_write); });
    EXPECT_THAT(msg, HasSubstr(why));
  } else if (fd >= 0) {
    ::close(fd);
    ::unlink(sysfs_file);
  }

  const std::string directory = dir.file("adir");
  fs::create_directory(directory);
  msg = usage_error_of([&] { Database::open(directory, Database::Mode::read_write); });
  EXPECT_THAT(msg, HasSubstr(directory));
  EXPECT_THAT(msg, HasSubstr("directory"));
}

// ---- Transactions -------------------------------------------------------------------------------

TEST(StoreTest, TransactionRollsBackUnlessCommitted) {
  TempDir dir;
  Database db = Database::open(dir.file("tx.db"), Database::Mode::read_write);
  {
    Transaction tx(db);
    insert_run(db, "rolled back");
    EXPECT_EQ(count(db, "SELECT count(*) FROM run"), 1);  // visible inside the transaction
  }
  EXPECT_EQ(count(db, "SELECT count(*) FROM run"), 0);

  EXPECT_THROW(
      {
        Transaction tx(db);
        insert_run(db, "rolled back too");
        CPRR_THROW("something failed mid-transaction");
      },
      Error);
  EXPECT_EQ(count(db, "SELECT count(*) FROM run"), 0);

  {
    Transaction tx(db);
    insert_run(db, "kept");
    tx.commit();
    EXPECT_THROW(tx.commit(), Error);
  }
  EXPECT_EQ(count(db, "SELECT count(*) FROM run WHERE host = 'kept'"), 1);
  // A transaction can start again after all of the above: nothing was left open.
  Transaction tx(db);
  tx.commit();
}

TEST(StoreTest, ProcessKilledMidTransactionKeepsEveryCommittedTransaction) {
  TempDir dir;
  const std::string path = dir.file("crash.db");
  constexpr int kCommitted = 25;
  const pid_t child = spawn([&] {
    Database db = Database::open(path, Database::Mode::read_write);
    for (int i = 0; i < kCommitted; ++i) {
      Transaction tx(db);
      insert_run(db, "committed");
      tx.commit();
    }
    Transaction tx(db);
    insert_run(db, "uncommitted");
    ::raise(SIGKILL);
  });
  const int status = wait_status(child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  EXPECT_TRUE(fs::exists(path + "-wal")) << "the committed rows should still be in the WAL";

  for (auto mode : {Database::Mode::read_only, Database::Mode::read_write}) {
    const Database db = Database::open(path, mode);
    EXPECT_EQ(count(db, "SELECT count(*) FROM run"), kCommitted);
    EXPECT_EQ(count(db, "SELECT count(*) FROM run WHERE host = 'uncommitted'"), 0);
    EXPECT_EQ(pragma_text(db, "integrity_check"), "ok");
  }
}

/// Two processes, started together, each inserting `per_child` rows one transaction per row.
void concurrent_writers(const std::string& path, int per_child) {
  StartGate gate;
  std::vector<pid_t> children;
  for (int c = 0; c < 2; ++c) {
    children.push_back(spawn([&, c] {
      gate.wait();
      Database db = Database::open(path, Database::Mode::read_write);
      const std::string host = "child" + std::to_string(c);
      for (int i = 0; i < per_child; ++i) {
        Transaction tx(db);
        insert_run(db, host);
        tx.commit();
      }
    }));
  }
  gate.open();
  for (pid_t pid : children) {
    const int status = wait_status(pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  const Database db = Database::open(path, Database::Mode::read_only);
  EXPECT_EQ(count(db, "SELECT count(*) FROM run"), 2 * per_child);
  EXPECT_EQ(count(db, "SELECT count(*) FROM run WHERE host = 'child0'"), per_child);
  EXPECT_EQ(count(db, "SELECT count(*) FROM run WHERE host = 'child1'"), per_child);
}

TEST(StoreTest, ConcurrentWritersToOneWalDatabaseLoseNothing) {
  TempDir dir;
  const std::string path = dir.file("shared.db");
  Database::open(path, Database::Mode::read_write);  // exists, in WAL mode, before they start
  concurrent_writers(path, 200);
}

TEST(StoreTest, ConcurrentWritersCreatingTheSameNewDatabaseLoseNothing) {
  TempDir dir;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    concurrent_writers(dir.file("new" + std::to_string(round) + ".db"), 50);
  }
}

}  // namespace
}  // namespace cprr

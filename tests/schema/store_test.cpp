// The store (schema/store.h): every column of every table round-trips through a closed and
// reopened file, statement errors name the SQL and the path, transactions roll back unless
// committed and survive a killed writer, concurrent writers lose nothing. Opening files:
// store_open_test.cpp.
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
#include "tests/schema/store_support.h"

namespace cprr {
namespace {

namespace fs = std::filesystem;
using namespace store_test;  // NOLINT(google-build-using-namespace): this folder's own helpers
using samples::spawn;
using samples::StartGate;
using samples::wait_status;
using ::testing::HasSubstr;
using ::testing::Not;

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
         R"({"sqlite":"3.40.1"})"s, R"({"CPRR_X":"1"})"s, nullptr, nullptr, nullptr, "[]"s, "[]"s,
         "00112233445566778899aabbccddeeff"s, ""s, "0123456789abcdef"s, nullptr},
        {int64_t{2}, "2024-05-01T13:00:00Z"s, "2024-05-01T13:05:00Z"s, int64_t{0}, "0.1.0"s, ""s,
         "cuda"s, "both"s, "spread"s, "/w"s, "[]"s, "{}"s, "{}"s, "--fail-fast: case 1"s,
         int64_t{9007199254740991}, R"({"kind":"mpirun","hosts":["a"]})"s,
         R"(["--cases","/t/test_a.py"])"s,
         R"([{"path":"/t/test_a.py","xxh3":"00000000000000ff"}])"s,
         "ffeeddccbbaa99887766554433221100"s, "2/3 by time"s, "0123456789abcdef"s, int64_t{1}}}},
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
         0.0, "shared-memory window"s, "gloo_staged"s, "0,0,0,0"s, "gpus GPU-1234,GPU-5678"s,
         int64_t{29501}},
        {int64_t{101}, int64_t{1}, int64_t{11}, "fresh"s, int64_t{0}, int64_t{1}, int64_t{3},
         "hang"s, int64_t{1}, ""s, "2024-05-01T12:00:02Z"s, 2000.125, 150.5, ""s, ""s, ""s,
         "cpus 0-3"s, int64_t{0}}}},
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
         int64_t{-1}, ""s, ""s, int64_t{-1}, int64_t{0}, int64_t{0}, ""s, ""s, int64_t{0}},
        {int64_t{100}, int64_t{0}, int64_t{1}, int64_t{2}, "kernel"s, "axpy"s, "1,2"s, "3"s,
         int64_t{-1}, "0+64,8+8"s, "16+16"s, int64_t{-1}, int64_t{0}, int64_t{1}, "4"s, "0+32"s,
         int64_t{1}},
        {int64_t{100}, int64_t{0}, int64_t{2}, int64_t{1}, "signal"s, "signal"s, ""s, ""s,
         int64_t{63}, ""s, ""s, int64_t{3}, kMax, int64_t{0}, ""s, ""s, int64_t{0}}}},
      {"collective",
       "execution_id, rank, position",
       {{int64_t{100}, int64_t{0}, int64_t{0}, "all_reduce"s, int64_t{0}, "f32"s, int64_t{16},
         int64_t{0}, "max"s, int64_t{0}, int64_t{0}, int64_t{0}, int64_t{-1}, ""s, ""s, ""s,
         int64_t{0}},
        {int64_t{100}, int64_t{1}, int64_t{0}, "broadcast"s, int64_t{1}, "u8"s, int64_t{0},
         int64_t{1}, ""s, int64_t{0}, int64_t{2}, U64{0x8000000000000003ULL}, int64_t{-1},
         "tp.py:12"s, "7168,3072"s, "0,18446744073709551615"s, U64{512}},
        {int64_t{100}, int64_t{1}, int64_t{0}, "recv"s, int64_t{-1}, "f16"s, int64_t{6},
         int64_t{-1}, ""s, int64_t{1}, int64_t{2}, int64_t{0}, int64_t{0}, "stage.py:41"s, ""s, ""s,
         int64_t{0}}}},
      {"process_group",
       "execution_id, rank, id",
       {{int64_t{100}, int64_t{1}, int64_t{2}, "0,1"s, "gloo"s, "tp"s},
        {int64_t{100}, int64_t{1}, int64_t{4294967295}, ""s, ""s, ""s}}},
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

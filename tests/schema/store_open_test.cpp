// Opening a store file (schema/store_open.h): a newer schema version, a SQLite file that is not
// cprr's, a file that is no database, a corrupt one (the integrity check) and unusable locations
// are refused naming the path and left untouched; an empty file is created into.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "runtime/error.h"
#include "schema/store.h"
#include "tests/schema/store_support.h"

namespace cprr {
namespace {

namespace fs = std::filesystem;
using namespace store_test;  // NOLINT(google-build-using-namespace): this folder's own helpers
using ::testing::HasSubstr;
using ::testing::Not;

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

}  // namespace
}  // namespace cprr

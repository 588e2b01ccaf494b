// Store ingest benchmark: alloc_event and op rows into a fresh database in a temp directory, many
// rows per transaction (the recorder's way: one transaction per execution) against one row per
// transaction, side by side in one run. Prints figures; asserts nothing.
//
//   cprr_bench_store [--rows N] [--single-rows N] [--batch N] [--dir DIR]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "schema/store.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Figure {
  std::string table;
  int64_t per_txn = 0;
  int64_t rows = 0;
  double seconds = 0;
  double rate() const { return static_cast<double>(rows) / seconds; }
};

/// Parent rows for the foreign keys: one run, one case, and `executions` executions (ids 1..n).
void insert_parents(cprr::Database& db, int executions) {
  cprr::Transaction tx(db);
  db.exec(
      "INSERT INTO run (id, started_at, tool_version, host, backend, mode, placement, worker, "
      "argv, libraries, environment) VALUES (1, '2024-01-01T00:00:00Z', 'bench', 'localhost', "
      "'cpu', 'pool', 'packed', '/bench', '[]', '{}', '{}')");
  db.exec(
      "INSERT INTO test_case (id, run_id, plan_id, name, label, params, world_size, seed, expect, "
      "timeout_s) VALUES (1, 1, 1, 'bench/ingest', 'bench/ingest@4', '{}', 4, 0, 'pass', 0)");
  cprr::Statement exec(db,
                       "INSERT INTO execution (id, run_id, case_id, mode, world_id, pool_position, "
                       "attempt, status, as_expected, summary, started_at, wall_ms, startup_ms) "
                       "VALUES (?, 1, 1, 'pool', 1, ?, 1, 'pass', 1, '', '2024-01-01T00:00:00Z', "
                       "0, 0)");
  for (int64_t id = 1; id <= executions; ++id) exec.bind(1, id).bind(2, id).run();
  tx.commit();
}

/// Inserts `rows` rows of `table` for execution `execution`, `per_txn` rows per transaction.
Figure ingest(cprr::Database& db, const std::string& table, int64_t execution, int64_t rows,
              int64_t per_txn) {
  static const char* kNames[] = {"x", "y", "workspace", "grad_accumulator"};
  const bool alloc = table == "alloc_event";
  cprr::Statement insert(
      db, alloc ? "INSERT INTO alloc_event (execution_id, rank, seq, is_free, buffer, name, pool, "
                  "bytes, offset, stream) VALUES (?, ?, ?, ?, ?, ?, 'device', ?, ?, ?)"
                : "INSERT INTO op (execution_id, rank, seq, stream, kind, name, reads, writes, "
                  "event) VALUES (?, ?, ?, ?, 'kernel', ?, '1,2', '3', -1)");
  const auto start = Clock::now();
  for (int64_t i = 0; i < rows;) {
    cprr::Transaction tx(db);
    for (int64_t end = std::min(rows, i + per_txn); i < end; ++i) {
      const int64_t rank = i % 4, seq = i / 4;
      insert.bind(1, execution).bind(2, rank).bind(3, seq);
      if (alloc) {
        insert.bind(4, int64_t{seq % 2})
            .bind(5, int64_t{seq / 2})
            .bind(6, std::string_view(kNames[seq % 4]))
            .bind(7, int64_t{4096} << (seq % 12))
            .bind(8, int64_t{(seq / 2) * 65536})
            .bind(9, int64_t{seq % 3});
      } else {
        insert.bind(4, int64_t{seq % 3 - 1}).bind(5, std::string_view(kNames[seq % 4]));
      }
      insert.run();
    }
    tx.commit();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return {table, per_txn, rows, seconds};
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 200'000, single_rows = 5'000, batch = 1'000;
  std::string dir_arg;
  CLI::App app{
      "cprr store benchmark: alloc_event and op ingest, batched vs one row per transaction"};
  app.add_option("--rows", rows, "rows per table in the batched measurement")
      ->check(CLI::PositiveNumber);
  app.add_option("--single-rows", single_rows, "rows per table at one row per transaction")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "rows per transaction in the batched measurement")
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", dir_arg, "directory for the database (default: a new one under /tmp)");
  CLI11_PARSE(app, argc, argv);

  std::string dir = dir_arg;
  if (dir.empty()) {
    char tmpl[] = "/tmp/cprr_bench_store_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::perror("mkdtemp");
      return 2;
    }
    dir = tmpl;
  }
  const std::string path = dir + "/bench.db";
  std::filesystem::remove(path);
  std::vector<Figure> figures;
  try {
    cprr::Database db = cprr::Database::open(path, cprr::Database::Mode::read_write);
    insert_parents(db, 4);
    int64_t execution = 1;
    for (const char* table : {"alloc_event", "op"}) {
      figures.push_back(ingest(db, table, execution++, rows, batch));
      figures.push_back(ingest(db, table, execution++, single_rows, 1));
    }
  } catch (const cprr::Error& e) {
    std::fprintf(stderr, "cprr_bench_store: %s\n", e.what());
    return 2;
  }

  std::printf("sqlite %s, WAL, synchronous=NORMAL, database %s (%.1f MiB)\n", sqlite3_libversion(),
              path.c_str(), static_cast<double>(std::filesystem::file_size(path)) / (1 << 20));
  std::printf("%-12s %9s %10s %9s %12s\n", "table", "rows/txn", "rows", "seconds", "rows/s");
  for (const Figure& f : figures) {
    std::printf("%-12s %9lld %10lld %9.3f %12.0f\n", f.table.c_str(),
                static_cast<long long>(f.per_txn), static_cast<long long>(f.rows), f.seconds,
                f.rate());
  }
  for (std::size_t i = 0; i + 1 < figures.size(); i += 2) {
    std::printf("%s: %lld rows/txn is %.1fx the rate of 1 row/txn\n", figures[i].table.c_str(),
                static_cast<long long>(figures[i].per_txn),
                figures[i].rate() / figures[i + 1].rate());
  }
  if (dir_arg.empty()) std::filesystem::remove_all(dir);
  return 0;
}

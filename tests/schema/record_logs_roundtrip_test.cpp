// The allocation, op and collective logs, the watchdog answers, exits and tails of every rank:
// written, closed, reopened and read back exactly, edge values included. Rows that no cprr writes
// are refused with a message naming them, never read as something else.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <limits>

#include "runtime/error.h"
#include "schema/record_reader.h"
#include "schema/record_writer.h"
#include "schema/store.h"
#include "tests/schema/record_samples.h"

namespace cprr {
namespace {

using namespace cprr::samples;
using ::testing::HasSubstr;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

const std::string kUnicode = "na\xc3\xafve \xe7\xbc\x93\xe5\x86\xb2 \xe2\x9c\x93";  // naïve 缓冲 ✓

/// Rank 0's logs at the limits of every field.
void fill_edge_logs(CaseCapture& cap) {
  cap.allocs = {
      {0, false, 0, "", "device", 0, 0, 0},
      {1, false, kU32Max, kUnicode, "symmetric", kU64Max, kU64Max - 1, kI32Min},
      {2, true, kU32Max, kUnicode, "symmetric", kU64Max, kU64Max - 1, kI32Max},
      {uint64_t{1} << 40, false, 7, "host buf", "host", 1, uint64_t{1} << 63, -1},
  };
  cap.ops = {
      {0, -1, "host", "setup", {}, {}, -1},
      {1, 2, "kernel", kUnicode, {0, 1, kU32Max}, {kU32Max}, -1},
      {2, 0, "record", "", {}, {}, kI64Max},
      {3, 1, "wait", "w", {}, {}, kI64Min},
      {4, -1, "sync", "all streams", {}, {}, -1},
      {5, kI32Max, "copy", "d2d", {4}, {}, 0},
  };
  cap.collectives = {
      {0, "all_reduce", 0, DType::f32, 0, -1, ReduceOp::min},
      {1, "broadcast", kI32Min, DType::u8, kU64Max, kI32Max},
      {2, "all_to_all_v", 5, DType::f64, 12, 0},
      {3, "barrier", 0, DType::i64, 0, -1},
      {4, kUnicode, 0, DType::i32, 8, -1},
      // Each group and channel numbers its own: seq repeats across them, in any log order.
      {0, "all_gather", 1, DType::bf16, 4096, -1, ReduceOp::sum, kU32Max, kU64Max, -1, "tp.py:12"},
      {0, "send", -1, DType::f16, 6, -1, ReduceOp::sum, 3, uint64_t{1} << 63, kI32Max, kUnicode},
      {0, "recv", -1, DType::u8, 0, -1, ReduceOp::sum, 0, 0, 0, ""},
      {1,
       "all_to_all_v",
       0,
       DType::bf16,
       10240,
       -1,
       ReduceOp::sum,
       5,
       0b11,
       -1,
       "moe.py:3",
       {7168, 3072},
       {kU64Max, 0},
       512},
  };
  cap.groups = {{1, {2, 3}, "gloo", "tp"},  // in id order, as read back
                {3, {kI32Max, 0}, kUnicode, kUnicode},
                {kU32Max, {}, "", ""}};
}

/// Five ranks, one of each kind a rank can end as: reported with edge-value logs; died by a
/// signal with a busy watchdog; reported with empty logs and then exited; killed while silent
/// with an idle watchdog and binary tails; exited with code 0 without reporting.
ExecutionResult five_ranks() {
  ExecutionResult r = execution(Mode::pool, 1, 1);
  r.id = 9;
  r.status = ExecStatus::hang;
  fill_edge_logs(r.ranks[0].done->capture);
  r.ranks[0].stderr_tail = kUnicode;
  r.ranks[1].exit = ExitInfo{-1, 9};
  // What its flight record says it entered before it died (the last collective: a max).
  r.ranks[1].entered = {
      {0, "all_reduce", 0, DType::f32, 64, -1},
      {uint64_t{1} << 40, "all_reduce", 3, DType::f64, kU64Max, -1, ReduceOp::max}};
  r.ranks[1].watchdog =
      WatchdogStatus{9, "body", -1, "", -1, "", {"stream 0 (main): " + kUnicode, ""}};
  RankReport empty;
  empty.done = RankResult{};
  empty.done->reset_ms = -0.5;
  empty.exit = ExitInfo{3, 0};
  RankReport silent;
  silent.watchdog = WatchdogStatus{0, "idle", kI64Max, "barrier", kI64Min, "all_reduce", {}};
  silent.protocol_error = "eof after 12 bytes";
  for (int i = 0; i < 256; ++i) silent.stdout_tail.push_back(static_cast<char>(i));
  silent.stderr_tail = std::string(1, '\0');
  RankReport exited;
  exited.exit = ExitInfo{0, 0};
  r.ranks.push_back(empty);
  r.ranks.push_back(silent);
  r.ranks.push_back(exited);
  return r;
}

TEST(RecordLogsRoundTrip, EveryRankAndEveryLogComesBackExactly) {
  TempDb db;
  const CaseInstance inst = instance(1, "logs/edge", {{"name", kUnicode}}, 5);
  const ExecutionResult written = five_ranks();
  int64_t case_id = 0, id = 0;
  {
    RecordWriter w(db.path(),
                   RunMeta{BackendKind::cpu, {Mode::pool}, Placement::counter, "/bin/worker", {}});
    case_id = w.add_cases({inst})[0];
    id = w.write(written, case_id);
  }
  const auto execs = RecordReader(db.path()).executions(case_id);
  ASSERT_EQ(execs.size(), 1u);
  const ExecutionResult want = as_stored(written, id, inst);
  EXPECT_EQ(want, execs[0].result);
  // The edges as_stored documents, spelled out.
  const ExecutionResult& got = execs[0].result;
  ASSERT_EQ(got.ranks.size(), 5u);
  EXPECT_EQ(got.ranks[1].watchdog->execution, static_cast<uint64_t>(id)) << "busy: the row's";
  EXPECT_EQ(got.ranks[3].watchdog->execution, 0u) << "idle: none";
  EXPECT_FALSE(got.ranks[3].exit.has_value());
  EXPECT_TRUE(got.ranks[2].done->capture.allocs.empty());
  EXPECT_EQ(got.ranks[0].done->capture.allocs[1].offset, kU64Max - 1);
  ASSERT_EQ(got.ranks[1].entered.size(), 2u) << "a rank without a result keeps its flight record";
  EXPECT_EQ(got.ranks[1].entered[1].op, ReduceOp::max);

  // Detail::captures (cpreplay's reads) leaves the logs out and everything else in.
  const auto light = RecordReader(db.path()).executions(case_id, RecordReader::Detail::captures);
  ASSERT_EQ(light.size(), 1u);
  const CaseCapture& full = got.ranks[0].done->capture;
  const CaseCapture& part = light[0].result.ranks[0].done->capture;
  ASSERT_FALSE(full.allocs.empty());
  ASSERT_FALSE(full.ops.empty());
  EXPECT_TRUE(part.allocs.empty());
  EXPECT_TRUE(part.ops.empty());
  EXPECT_TRUE(part.collectives.empty());
  EXPECT_EQ(part.outputs.size(), full.outputs.size());
  EXPECT_EQ(part.probes.size(), full.probes.size());
}

// An op's spans (which bytes of each buffer it touches: slices) come back exactly, parallel to
// its buffer lists; an op without spans (a record from before them) reads as whole buffers. A
// one-sided op's peer and epoch come back too, whether an op only moves bytes, and the buffers
// it uses in a direction not known, and whether a probe replay learned its directions.
TEST(RecordLogsRoundTrip, OpSpansComeBackParallelToTheirBuffers) {
  TempDb db;
  const CaseInstance inst = instance(1, "logs/spans", {}, 2);
  ExecutionResult r = execution(Mode::pool, 1, 1);
  OpRecord sliced{0, 1, "kernel", "halves", {4, 4}, {5}, -1};
  sliced.read_spans = {{0, 64}, {64, 64}};
  sliced.write_spans = {{kU64Max - 1, 1}};
  sliced.moves = true;
  sliced.touches = {6, 4};
  sliced.touch_spans = {{16, 8}, {0, kU64Max}};
  sliced.probed = true;
  OpRecord signal{2, 1, "signal", "signal", {}, {}, 5};
  signal.peer = 1;
  signal.epoch = kU64Max;
  r.ranks[0].done->capture.ops = {sliced, OpRecord{1, 0, "kernel", "whole", {4}, {}, -1}, signal};
  int64_t case_id = 0;
  {
    RecordWriter w(db.path(),
                   RunMeta{BackendKind::cpu, {Mode::pool}, Placement::best_fit, "/bin/worker", {}});
    case_id = w.add_cases({inst})[0];
    w.write(r, case_id);
  }
  const auto execs = RecordReader(db.path()).executions(case_id);
  ASSERT_EQ(execs.size(), 1u);
  const auto& ops = execs[0].result.ranks[0].done->capture.ops;
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].read_spans, sliced.read_spans);
  EXPECT_EQ(ops[0].write_spans, sliced.write_spans);
  EXPECT_TRUE(ops[0].moves);
  EXPECT_EQ(ops[0].touches, sliced.touches);
  EXPECT_EQ(ops[0].touch_spans, sliced.touch_spans);
  EXPECT_TRUE(ops[0].probed);
  EXPECT_FALSE(ops[1].probed);
  EXPECT_FALSE(ops[1].moves);
  EXPECT_TRUE(ops[1].touches.empty());
  EXPECT_TRUE(ops[1].read_spans.empty());
  EXPECT_EQ(ops[1].peer, -1);
  EXPECT_EQ(ops[2].peer, 1);
  EXPECT_EQ(ops[2].epoch, kU64Max) << "the epoch is a full 64-bit value";
}

// cpreplay --list reads every execution of a file through one reader: its prepared statements
// are reused across executions, cases and interleaved calls, and stay usable after an error.
TEST(RecordLogsRoundTrip, OneReaderReadsManyExecutionsAndStaysUsable) {
  TempDb db;
  std::vector<int64_t> ids;
  std::vector<CaseInstance> plan;
  for (uint32_t i = 1; i <= 12; ++i)
    plan.push_back(instance(i, "many/c" + std::to_string(i), {}, 2));
  std::vector<std::vector<std::pair<int64_t, ExecutionResult>>> written(plan.size());
  {
    RecordWriter w(
        db.path(),
        RunMeta{
            BackendKind::cpu, {Mode::fresh, Mode::pool}, Placement::best_fit, "/bin/worker", {}});
    ids = w.add_cases(plan);
    for (std::size_t i = 0; i < plan.size(); ++i) {
      for (Mode mode : {Mode::fresh, Mode::pool}) {
        ExecutionResult r = execution(mode, mode == Mode::pool ? 1 : 100 + i, i + 1);
        r.ranks[0].done->capture.ops.push_back(
            OpRecord{1, 0, "kernel", plan[i].label(), {}, {}, -1});
        written[i].emplace_back(w.write(r, ids[i]), r);
      }
    }
  }
  const RecordReader reader(db.path());
  EXPECT_THROW(reader.find_case(-1), UsageError);
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < plan.size(); ++i) {
      SCOPED_TRACE(plan[i].label());
      const auto execs = reader.executions(ids[i]);
      ASSERT_EQ(execs.size(), 2u);
      for (std::size_t e = 0; e < 2; ++e) {
        EXPECT_EQ(as_stored(written[i][e].second, written[i][e].first, plan[i]), execs[e].result);
      }
      EXPECT_EQ(reader.predecessors(execs[1]).size(), i);
    }
  }
}

/// A copy of `source` with `sql` applied: a row no cprr writes.
std::string damaged_copy(const TempDb& db, const std::string& source, const std::string& sql) {
  static int n = 0;
  const std::string path = db.path("damaged" + std::to_string(++n) + ".db");
  std::filesystem::copy_file(source, path);
  Database::open(path, Database::Mode::read_write).exec(sql);
  return path;
}

TEST(RecordLogsRoundTrip, RowsNoCprrWritesAreRefusedNotMisread) {
  TempDb db;
  std::vector<int64_t> ids;
  {
    RecordWriter w(db.path(),
                   RunMeta{BackendKind::cpu, {Mode::pool}, Placement::best_fit, "/bin/worker", {}});
    ids = w.add_cases({instance(1, "a/damaged", {}, 2), instance(2, "a/intact", {}, 2)});
    w.write(execution(Mode::pool, 1, 1), ids[0]);
    w.write(execution(Mode::pool, 1, 2), ids[1]);
  }
  const std::string e1 = "execution_id = 1";
  const std::vector<std::pair<std::string, std::string>> damage = {
      {"UPDATE op SET reads = '1,,2' WHERE " + e1, "op buffer list '1,,2'"},
      {"UPDATE op SET writes = '1,' WHERE " + e1, "op buffer list '1,'"},
      {"UPDATE op SET reads = '4294967296' WHERE " + e1, "op buffer list"},
      {"UPDATE collective SET dtype = 'f128' WHERE " + e1, "unknown dtype 'f128'"},
      {"UPDATE collective SET op = 'avg' WHERE " + e1, "unknown reduce op 'avg'"},
      {"UPDATE capture SET kind = 'probes' WHERE kind = 'probe' AND " + e1,
       "unknown capture kind 'probes'"},
      {"UPDATE capture SET chunk_hashes = x'00' WHERE " + e1, "not a multiple of 8"},
      {"UPDATE execution SET status = 'passed' WHERE id = 1", "unknown execution status"},
      {"UPDATE execution SET started_at = '2020-13-01T00:00:00.000Z' WHERE id = 1",
       "unknown execution start time"},
      {"UPDATE rank_result SET signal = NULL WHERE rank = 1 AND " + e1, "does not fit"},
      {"UPDATE rank_result SET watchdog = '{\"phase\":1}' WHERE rank = 1 AND " + e1,
       "watchdog answer"},
      {"INSERT INTO op VALUES (1, 1, 0, 0, 'kernel', 'k', '', '', -1, '', '', -1, 0, 0, '', '', 0)",
       "which has no result"},
      {"UPDATE op SET touches = '1', touch_spans = '0+4,8+4' WHERE " + e1, "2 spans for 1 buffers"},
      {"UPDATE op SET reads = '1', read_spans = '0+4,8+4' WHERE " + e1, "2 spans for 1 buffers"},
      {"UPDATE op SET reads = '1', read_spans = '0-4' WHERE " + e1, "op span list '0-4'"},
      {"DELETE FROM rank_result WHERE rank = 0 AND " + e1, "no rank_result row for rank 0"},
  };
  for (const auto& [sql, message] : damage) {
    SCOPED_TRACE(sql);
    const RecordReader reader(damaged_copy(db, db.path(), sql));
    try {
      reader.executions(ids[0]);
      ADD_FAILURE() << "read without an error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(message));
      EXPECT_THAT(e.what(), HasSubstr("damaged"));  // the path
    }
    EXPECT_EQ(reader.executions(ids[1]).size(), 1u) << "the reader must stay usable";
  }
}

}  // namespace
}  // namespace cprr

namespace cprr {
namespace {

// The text the writer puts in its joined columns keeps its form byte for byte, although the writer
// binds it without copying: readers of older files and ad-hoc SQL depend on the form.
TEST(RecordLogsRoundTrip, JoinedColumnsKeepTheirTextForm) {
  const TempDb tmp;
  ExecutionResult r = execution(Mode::pool, 1, 1);
  CaseCapture& cap = r.ranks[0].done->capture;
  cap.probes[0].shape = {3, -1, int64_t{1} << 40};
  cap.outputs[0].shape = {};
  OpRecord op{7, 1, "copy", "stage", {1, kU32Max}, {}, -1};
  op.read_spans = {{0, 64}, {kU64Max - 1, 1}};
  cap.ops = {op};
  {
    RecordWriter w(tmp.path(),
                   RunMeta{BackendKind::cpu, {Mode::pool}, Placement::best_fit, "/w", {}});
    w.write(r, w.add_cases({instance(1, "a/b", {}, 2)}).at(0));
  }
  const Database db = Database::open(tmp.path(), Database::Mode::read_only);
  Statement shapes(db, "SELECT shape FROM capture WHERE rank = 0 ORDER BY kind DESC, seq");
  std::vector<std::string> got;
  while (shapes.step()) got.push_back(shapes.text(0));
  EXPECT_EQ(got, (std::vector<std::string>{"[3,-1,1099511627776]", "[]", "[2,8750]"}));
  Statement ops(db, "SELECT reads, writes, read_spans, write_spans FROM op");
  ASSERT_TRUE(ops.step());
  EXPECT_EQ(ops.text(0), "1,4294967295");
  EXPECT_EQ(ops.text(1), "");
  EXPECT_EQ(ops.text(2), "0+64,18446744073709551614+1");
  EXPECT_EQ(ops.text(3), "");
}

}  // namespace
}  // namespace cprr

#pragma once
// Shared by the record round-trip suites: sample cases and executions with edge values, what the
// store is documented to give back for them (as_stored), and field-by-field comparisons that name
// the field that differs.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/case_info.h"
#include "data/execution.h"
#include "schema/record.h"

namespace cprr::samples {

/// A fresh directory under /tmp holding one database path, removed with everything in it.
class TempDb {
 public:
  TempDb() {
    std::string dir = "/tmp/cprr-roundtrip-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = dir;
  }
  ~TempDb() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name = "r.db") const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

inline CaseInstance instance(uint32_t id, const std::string& name, Params params, int w) {
  CaseInstance inst;
  inst.id = id;
  inst.info.name = name;
  inst.info.options.world_sizes = {w};
  inst.info.options.expect = Expect::crash;
  inst.info.options.timeout_s = 2.5;
  inst.info.options.seeded_bug = "state_leak";
  inst.params = std::move(params);
  inst.world_size = w;
  inst.seed = kMaxSeed - id;  // the largest seeds a plan makes
  return inst;
}

inline Capture capture(const std::string& name, uint32_t seq, std::string raw) {
  Capture c;
  c.seq = seq;
  c.name = name;
  c.dtype = DType::i32;
  c.shape = {2, static_cast<int64_t>(raw.size() / 8)};
  c.bytes = raw.size();
  c.stream = 3;
  c.digest = hash_buffer(raw.data(), raw.size());
  c.raw = std::move(raw);
  return c;
}

/// Two ranks: rank 0 failed with captures and one entry in each log, rank 1 died (SIGSEGV).
inline ExecutionResult execution(Mode mode, uint64_t world, uint64_t position) {
  ExecutionResult r;
  r.mode = mode;
  r.world_id = world;
  r.pool_position = position;
  r.attempt = 2;
  r.status = ExecStatus::crash;
  r.summary = "rank 1 killed by signal 11 (SIGSEGV)";
  r.wall_ms = 12.5;
  RankReport ok;
  ok.done = RankResult{};
  ok.done->outcome = RankOutcome::fail;
  ok.done->error = "expectation failed";
  ok.done->capture.probes = {capture("p0", 0, std::string("\0\1\2\3\4\5\6\7", 8))};
  ok.done->capture.outputs = {capture("out", 0, std::string(4096, '\xab')),
                              capture("big", 1, std::string(70000, 'x'))};
  ok.done->capture.outputs[1].raw.clear();  // over the raw limit: not kept
  ok.done->capture.allocs = {AllocRecord{0, false, 1, "data", "device", 4096, 256, 0}};
  ok.done->capture.ops = {OpRecord{0, 2, "kernel", "fill", {1}, {1, 2}, -1}};
  ok.done->capture.collectives = {CollectiveRecord{0, "all_reduce", 0, DType::f32, 64, -1}};
  ok.stdout_tail = std::string("NCCL version\0binary", 19);
  RankReport dead;
  dead.exit = ExitInfo{-1, 11};
  dead.stderr_tail = "about to write";
  r.ranks = {ok, dead};
  return r;
}

/// What the reader is documented to give back for `written`, stored as execution `id` of `inst`
/// (schema/record_reader.h: RecordedExecution): the store's ids, the note inside the summary,
/// the start time to the millisecond, no raw bytes above kRawCaptureLimit, no exit code beside a
/// signal.
inline ExecutionResult as_stored(ExecutionResult r, int64_t id, const CaseInstance& inst) {
  r.id = static_cast<uint64_t>(id);
  r.case_id = inst.id;
  r.label = inst.label();
  if (!r.note.empty()) r.summary += (r.summary.empty() ? "" : "; ") + r.note;
  r.note.clear();
  r.started_at = std::chrono::floor<std::chrono::milliseconds>(r.started_at);
  for (RankReport& rep : r.ranks) {
    if (rep.done) {
      rep.done->execution = r.id;
      for (auto* list : {&rep.done->capture.probes, &rep.done->capture.outputs}) {
        for (Capture& c : *list) {
          if (c.bytes > kRawCaptureLimit) c.raw.clear();
        }
      }
    }
    // Only an all_reduce's reduction is stored; a rank with a result has no flight record rows.
    if (rep.done) rep.entered.clear();
    for (auto* list : {&rep.entered, rep.done ? &rep.done->capture.collectives : nullptr}) {
      if (list == nullptr) continue;
      for (CollectiveRecord& c : *list) {
        if (c.kind != "all_reduce") c.op = ReduceOp::sum;
      }
    }
    if (rep.watchdog) rep.watchdog->execution = rep.watchdog->phase == "idle" ? 0 : r.id;
    if (rep.exit && rep.exit->signal != 0) rep.exit->exit_code = -1;
  }
  return r;
}

// ---- Field-by-field comparisons (want first) --------------------------------------------------

inline void expect_same(const Capture& want, const Capture& got) {
  SCOPED_TRACE("capture '" + want.name + "'");
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(got.shape, want.shape);
  EXPECT_EQ(got.bytes, want.bytes);
  EXPECT_EQ(got.stream, want.stream);
  EXPECT_EQ(got.digest.whole, want.digest.whole);
  EXPECT_EQ(got.digest.chunks, want.digest.chunks);
  EXPECT_EQ(got.raw, want.raw);
}

inline void expect_same(const AllocRecord& want, const AllocRecord& got) {
  SCOPED_TRACE("alloc_event " + std::to_string(want.seq));
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.is_free, want.is_free);
  EXPECT_EQ(got.buffer, want.buffer);
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.pool, want.pool);
  EXPECT_EQ(got.bytes, want.bytes);
  EXPECT_EQ(got.offset, want.offset);
  EXPECT_EQ(got.stream, want.stream);
}

inline void expect_same(const OpRecord& want, const OpRecord& got) {
  SCOPED_TRACE("op " + std::to_string(want.seq));
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.stream, want.stream);
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.reads, want.reads);
  EXPECT_EQ(got.writes, want.writes);
  EXPECT_EQ(got.event, want.event);
  EXPECT_EQ(got.peer, want.peer);
  EXPECT_EQ(got.epoch, want.epoch);
}

inline void expect_same(const CollectiveRecord& want, const CollectiveRecord& got) {
  SCOPED_TRACE("collective " + std::to_string(want.seq));
  EXPECT_EQ(got.seq, want.seq);
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.stream, want.stream);
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(got.bytes, want.bytes);
  EXPECT_EQ(got.root, want.root);
  EXPECT_EQ(got.op, want.op);
}

template <class T>
void expect_same_list(const std::vector<T>& want, const std::vector<T>& got) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) expect_same(want[i], got[i]);
}

inline void expect_same(const WatchdogStatus& want, const WatchdogStatus& got) {
  SCOPED_TRACE("watchdog");
  EXPECT_EQ(got.execution, want.execution);
  EXPECT_EQ(got.phase, want.phase);
  EXPECT_EQ(got.entered_seq, want.entered_seq);
  EXPECT_EQ(got.entered_kind, want.entered_kind);
  EXPECT_EQ(got.completed_seq, want.completed_seq);
  EXPECT_EQ(got.completed_kind, want.completed_kind);
  EXPECT_EQ(got.running, want.running);
}

inline void expect_same(const RankResult& want, const RankResult& got) {
  EXPECT_EQ(got.execution, want.execution);
  EXPECT_EQ(got.outcome, want.outcome);
  EXPECT_EQ(got.error, want.error);
  EXPECT_EQ(got.reset_ms, want.reset_ms);
  EXPECT_EQ(got.body_ms, want.body_ms);
  expect_same_list(want.capture.probes, got.capture.probes);
  expect_same_list(want.capture.outputs, got.capture.outputs);
  expect_same_list(want.capture.allocs, got.capture.allocs);
  expect_same_list(want.capture.ops, got.capture.ops);
  expect_same_list(want.capture.collectives, got.capture.collectives);
}

inline void expect_same(const RankReport& want, const RankReport& got) {
  ASSERT_EQ(got.done.has_value(), want.done.has_value());
  if (want.done) expect_same(*want.done, *got.done);
  ASSERT_EQ(got.watchdog.has_value(), want.watchdog.has_value());
  if (want.watchdog) expect_same(*want.watchdog, *got.watchdog);
  ASSERT_EQ(got.exit.has_value(), want.exit.has_value());
  if (want.exit) {
    EXPECT_EQ(got.exit->signal, want.exit->signal);
    EXPECT_EQ(got.exit->exit_code, want.exit->exit_code);
  }
  EXPECT_EQ(got.protocol_error, want.protocol_error);
  EXPECT_EQ(got.stdout_tail, want.stdout_tail);
  EXPECT_EQ(got.stderr_tail, want.stderr_tail);
  expect_same_list(want.entered, got.entered);
}

inline void expect_same(const ExecutionResult& want, const ExecutionResult& got) {
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(got.case_id, want.case_id);
  EXPECT_EQ(got.label, want.label);
  EXPECT_EQ(got.mode, want.mode);
  EXPECT_EQ(got.attempt, want.attempt);
  EXPECT_EQ(got.world_id, want.world_id);
  EXPECT_EQ(got.pool_position, want.pool_position);
  EXPECT_EQ(got.status, want.status);
  EXPECT_EQ(got.as_expected, want.as_expected);
  EXPECT_EQ(got.summary, want.summary);
  EXPECT_EQ(got.note, want.note);
  EXPECT_EQ(got.started_at, want.started_at);
  EXPECT_EQ(got.wall_ms, want.wall_ms);
  EXPECT_EQ(got.startup_ms, want.startup_ms);
  EXPECT_EQ(got.symmetric_pool, want.symmetric_pool);
  EXPECT_EQ(got.collectives, want.collectives);
  EXPECT_EQ(got.rank_gpus, want.rank_gpus);
  EXPECT_EQ(got.interrupted, want.interrupted);
  ASSERT_EQ(got.ranks.size(), want.ranks.size());
  for (std::size_t r = 0; r < want.ranks.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    expect_same(want.ranks[r], got.ranks[r]);
  }
}

inline void expect_same(const CaseInstance& want, const CaseInstance& got) {
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(got.info.name, want.info.name);
  EXPECT_EQ(got.params, want.params);
  EXPECT_EQ(got.world_size, want.world_size);
  EXPECT_EQ(got.seed, want.seed);
  EXPECT_EQ(got.label(), want.label());
  EXPECT_EQ(got.info.options.expect, want.info.options.expect);
  EXPECT_EQ(got.info.options.timeout_s, want.info.options.timeout_s);
  EXPECT_EQ(got.info.options.seeded_bug, want.info.options.seeded_bug);
  EXPECT_EQ(got.info.options.world_sizes, std::vector<int>{want.world_size});
}

inline void expect_same(const CaseJudgement& want, const CaseJudgement& got) {
  EXPECT_EQ(got.case_id, want.case_id);
  EXPECT_EQ(got.verdict, want.verdict);
  EXPECT_EQ(got.as_expected, want.as_expected);
  EXPECT_EQ(got.fresh_vs_pool, want.fresh_vs_pool);
}

}  // namespace cprr::samples

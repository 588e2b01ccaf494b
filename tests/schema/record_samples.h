#pragma once
// Shared by the record round-trip suites: sample cases and executions with edge values, and what
// the store is documented to give back for them (as_stored), to compare whole with what it does.
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
#include "tests/data/record_printers.h"

namespace cprr {

/// For a failed EXPECT_EQ on a judgement (schema/record.h has no serialize()).
inline void PrintTo(const CaseJudgement& j, std::ostream* os) {
  test::print_fields(os, j.case_id, j.verdict, j.as_expected, j.fresh_vs_pool);
}

}  // namespace cprr

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
/// the start time to the millisecond, no start-up phases or timelines (not stored), no raw bytes
/// above kRawCaptureLimit, no exit code beside a signal.
inline ExecutionResult as_stored(ExecutionResult r, int64_t id, const CaseInstance& inst) {
  r.id = static_cast<uint64_t>(id);
  r.case_id = inst.id;
  r.label = inst.label();
  if (!r.note.empty()) r.summary += (r.summary.empty() ? "" : "; ") + r.note;
  r.note.clear();
  r.started_at = std::chrono::floor<std::chrono::milliseconds>(r.started_at);
  r.startup_phases.clear();
  for (RankReport& rep : r.ranks) {
    if (rep.done) {
      rep.done->execution = r.id;
      rep.done->capture.timeline = {};
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

/// What the reader gives back for a planned `inst` (schema/record_reader.h: RecordedCase): no grid
/// or description (not stored), and the one world size it ran at as its world sizes.
inline CaseInstance as_stored(CaseInstance inst) {
  inst.info.options.world_sizes = {inst.world_size};
  inst.info.options.grid.clear();
  inst.info.options.description.clear();
  return inst;
}

}  // namespace cprr::samples

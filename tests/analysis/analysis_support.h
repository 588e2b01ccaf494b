#pragma once
// Hand-built record data for the analysis suites: captures hashed by the real definition, ranks
// that completed, executions of a case in a mode.
#include <string>
#include <string_view>
#include <vector>

#include "data/execution.h"
#include "kernels/hash.h"

namespace cprr::test {

/// A capture of `raw` (hashed by kernels/hash.h, raw bytes kept when small, as the rank does).
inline Capture capture_of(const std::string& name, const std::string& raw, DType dtype = DType::u8,
                          uint32_t seq = 0) {
  Capture c;
  c.seq = seq;
  c.name = name;
  c.dtype = dtype;
  c.bytes = raw.size();
  c.digest = hash_buffer(raw.data(), raw.size());
  if (raw.size() <= kRawCaptureLimit) c.raw = raw;
  return c;
}

/// An execution whose every rank completed with outputs "out" = `outputs[r]`.
inline ExecutionResult execution(uint64_t id, Mode mode, ExecStatus status,
                                 const std::vector<std::string>& outputs) {
  ExecutionResult e;
  e.id = id;
  e.mode = mode;
  e.status = status;
  for (const std::string& out : outputs) {
    RankReport r;
    r.done = RankResult{};
    r.done->execution = id;
    r.done->outcome = status == ExecStatus::fail ? RankOutcome::fail : RankOutcome::ok;
    r.done->capture.outputs.push_back(capture_of("out", out));
    e.ranks.push_back(std::move(r));
  }
  return e;
}

/// `e` as run by a world whose collectives took `transport` (ExecutionResult::collectives).
inline ExecutionResult through(ExecutionResult e, std::string_view transport) {
  e.collectives = std::string(transport);
  return e;
}

}  // namespace cprr::test

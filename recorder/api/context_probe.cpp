// A probe replay (Perturbation::probe_touches): what an op handed buffers with no
// direction (a Triton kernel's pointers, an extension's, Access::uses) really writes. Right before
// the op the host waits for the device and copies those bytes; once it ran (at whatever the case
// does next, the device idle again; for a declared block, at its end: hold_probe) it compares
// them. Changed bytes are writes; the others are kept as touches of a probed op: unwritten,
// perhaps read (OpRecord::probed). Wherever the probe cannot be exact (memory no longer readable,
// changes too scattered, a graph capture open) the op stays unprobed, as it was logged.
#include <algorithm>
#include <cstring>
#include <optional>

#include "recorder/api/context.h"
#include "recorder/api/library_graphs.h"

namespace cprr {

namespace {

/// Write runs are widened to whole words of this many bytes from the buffer's start (a float's or
/// an int's): an element whose value changed keeps some of its bytes (0.0f -> 1.0f changes two of
/// four). Runs are joined only where their words touch: a byte between two runs that did not
/// change is not claimed as written (another op may own it).
constexpr uint64_t kWord = 4;
/// Write runs kept per touch: an op that changed more runs than this (a ReLU's zeros scattered
/// through its output) stays unprobed, of unknown direction, rather than be given bytes it may
/// not have written.
constexpr std::size_t kMaxWriteRuns = 64;

struct Run {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The runs of bytes that differ between `a` and `b` (the same size, byte 0 at `base` of the
// buffer), widened to whole words within the size, runs whose words touch joined; nullopt past
// kMaxWriteRuns.
std::optional<std::vector<Run>> changed_runs(const std::vector<std::byte>& a,
                                             const std::vector<std::byte>& b, uint64_t base) {
  std::vector<Run> runs;
  const auto word_start = [&](uint64_t i) {
    const uint64_t at = (base + i) / kWord * kWord;
    return at < base ? 0 : at - base;
  };
  const auto word_end = [&](uint64_t i) {
    return std::min<uint64_t>(a.size(), (base + i + kWord - 1) / kWord * kWord - base);
  };
  constexpr uint64_t kBlock = 256;  // equal blocks are skipped with one memcmp
  for (uint64_t at = 0; at < a.size(); at += kBlock) {
    const uint64_t n = std::min<uint64_t>(kBlock, a.size() - at);
    if (std::memcmp(a.data() + at, b.data() + at, n) == 0) continue;
    for (uint64_t i = at; i < at + n; ++i) {
      if (a[i] == b[i]) continue;
      const uint64_t begin = word_start(i), end = word_end(i + 1);
      if (!runs.empty() && begin <= runs.back().end) {
        runs.back().end = std::max(runs.back().end, end);
      } else {
        if (runs.size() == kMaxWriteRuns) return std::nullopt;
        runs.push_back(Run{begin, end});
      }
    }
  }
  return runs;
}

}  // namespace

std::optional<std::pair<const std::byte*, uint64_t>> Context::memory_of(uint32_t buffer) const {
  if (const auto it = live_.find(buffer); it != live_.end()) {
    return std::pair{state_.backend->arena_base(it->second.pool) + it->second.offset,
                     it->second.bytes};
  }
  for (auto it = logs_.allocs.rbegin(); it != logs_.allocs.rend(); ++it) {
    if (it->buffer != buffer) continue;
    // A tracked tensor's offset is its address; a symmetric tensor's is a place in a window.
    if (it->is_free || it->pool != "tensor") return std::nullopt;
    return std::pair{reinterpret_cast<const std::byte*>(it->offset), it->bytes};
  }
  return std::nullopt;
}

void Context::begin_probe(const OpRecord& op) {
  if (!perturbation_.probe_touches || op.touches.empty()) return;
  end_probe(true);
  // A device-wide sync inside a CUDA graph capture would invalidate it.
  if (library_graphs_ && library_graphs_->capturing()) return;
  if (op.touch_spans.size() != op.touches.size() || op.write_spans.size() != op.writes.size()) {
    return;  // spans are parallel to their buffers in every op cprr logs today
  }
  // Copied before any backend call: a copy the case's library logs meanwhile (a hook) may move
  // the op log, and `op` with it.
  TouchProbe probe{op.seq, {}, {}};
  const std::vector<ByteSpan> spans = op.touch_spans;
  uint64_t total = 0;
  for (std::size_t k = 0; k < op.touches.size(); ++k) {
    const auto memory = memory_of(op.touches[k]);
    const ByteSpan& s = spans[k];
    // Every touch or none: a probed op's touches all mean "left unchanged".
    if (!memory || s.offset > memory->second || s.bytes > memory->second - s.offset) return;
    total += s.bytes;
    if (total > kMaxProbeBytes) return;
    probe.at.push_back(memory->first + s.offset);
  }
  state_.backend->synchronize_device();
  for (std::size_t k = 0; k < spans.size(); ++k) {
    std::vector<std::byte>& bytes = probe.before.emplace_back(spans[k].bytes);
    if (!state_.backend->read_memory(bytes.data(), probe.at[k], bytes.size())) return;
  }
  probe_ = std::move(probe);
}

void Context::end_probe(bool now) {
  if (!probe_ || (probe_held_ && !now)) return;
  const TouchProbe probe = std::move(*probe_);
  probe_.reset();
  probe_held_ = false;
  state_.backend->synchronize_device();
  std::vector<std::vector<Run>> changed;
  for (std::size_t k = 0; k < probe.before.size(); ++k) {
    std::vector<std::byte> after(probe.before[k].size());
    if (!state_.backend->read_memory(after.data(), probe.at[k], after.size())) return;
    std::optional<std::vector<Run>> runs =
        changed_runs(probe.before[k], after, logs_.ops.at(probe.seq).touch_spans[k].offset);
    if (!runs) return;  // unprobed: too scattered to name exactly
    changed.push_back(std::move(*runs));
  }
  OpRecord& op = logs_.ops.at(probe.seq);  // looked up after the reads, which may log a copy
  std::vector<uint32_t> unchanged;
  std::vector<ByteSpan> unchanged_spans;
  for (std::size_t k = 0; k < op.touches.size(); ++k) {
    const uint32_t buffer = op.touches[k];
    const ByteSpan span = op.touch_spans[k];
    uint64_t from = 0;  // the next byte not yet named
    for (const Run& r : changed[k]) {
      if (r.begin > from) {
        unchanged.push_back(buffer);
        unchanged_spans.push_back(ByteSpan{span.offset + from, r.begin - from});
      }
      op.writes.push_back(buffer);
      op.write_spans.push_back(ByteSpan{span.offset + r.begin, r.end - r.begin});
      from = r.end;
    }
    if (from < span.bytes) {
      unchanged.push_back(buffer);
      unchanged_spans.push_back(ByteSpan{span.offset + from, span.bytes - from});
    }
  }
  op.touches = std::move(unchanged);
  op.touch_spans = std::move(unchanged_spans);
  op.probed = true;
}

void Context::hold_probe() { probe_held_ = probe_.has_value(); }

}  // namespace cprr

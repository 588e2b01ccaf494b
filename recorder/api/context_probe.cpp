// A probe replay (Perturbation::probe_touches, issue 57): what an op handed buffers with no
// direction (a Triton kernel's pointers, an extension's, Access::uses) really writes. Right before
// the op the host waits for the device and copies those bytes; once it ran (at whatever the case
// does next, the device idle again) it compares them. Changed bytes are writes; the others are
// kept as touches of a probed op: unwritten, perhaps read (OpRecord::probed).
#include <algorithm>
#include <cstring>

#include "recorder/api/context.h"

namespace cprr {

namespace {

/// Changed bytes closer than this are one write: an element whose value changed keeps some of
/// its bytes (0.0f -> 1.0f changes two of four), and a same-value write leaves a hole.
constexpr uint64_t kJoinGap = 64;
/// Write runs are widened to whole words of this many bytes from the buffer's start (a float's
/// or an int's), for the same reason.
constexpr uint64_t kWord = 4;
/// Write runs kept per touch: past it the closest runs merge (the runs' whole extent is the
/// bound's limit, as for a strided view's spans).
constexpr std::size_t kMaxWriteRuns = 64;

struct Run {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The runs of bytes that differ between `a` and `b` (the same size, byte 0 at `base` of the
// buffer), widened to whole words (kWord) within the size, runs closer than kJoinGap joined, at
// most kMaxWriteRuns (the smallest gaps closed first).
std::vector<Run> changed_runs(const std::vector<std::byte>& a, const std::vector<std::byte>& b,
                              uint64_t base) {
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
      if (!runs.empty() && begin <= runs.back().end + kJoinGap) {
        runs.back().end = std::max(runs.back().end, end);
      } else {
        runs.push_back(Run{begin, end});
      }
    }
  }
  if (runs.size() <= kMaxWriteRuns) return runs;
  std::vector<uint64_t> gaps;
  for (std::size_t k = 1; k < runs.size(); ++k) gaps.push_back(runs[k].begin - runs[k - 1].end);
  // Closing every gap up to the (n - kMaxWriteRuns)-th smallest leaves at most kMaxWriteRuns.
  std::nth_element(gaps.begin(), gaps.begin() + (runs.size() - kMaxWriteRuns - 1), gaps.end());
  const uint64_t close = gaps[runs.size() - kMaxWriteRuns - 1];
  std::vector<Run> merged{runs.front()};
  for (std::size_t k = 1; k < runs.size(); ++k) {
    if (runs[k].begin - merged.back().end <= close) {
      merged.back().end = runs[k].end;
    } else {
      merged.push_back(runs[k]);
    }
  }
  return merged;
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

void Context::begin_probe(OpRecord& op) {
  if (!perturbation_.probe_touches || op.touches.empty()) return;
  end_probe();
  if (op.touch_spans.size() != op.touches.size() || op.write_spans.size() != op.writes.size()) {
    return;  // spans are parallel to their buffers in every op cprr logs today
  }
  TouchProbe probe{op.seq, {}, {}};
  uint64_t total = 0;
  for (std::size_t k = 0; k < op.touches.size(); ++k) {
    const auto memory = memory_of(op.touches[k]);
    const ByteSpan& s = op.touch_spans[k];
    // Every touch or none: a probed op's touches all mean "left unchanged".
    if (!memory || s.offset > memory->second || s.bytes > memory->second - s.offset) return;
    total += s.bytes;
    if (total > kMaxProbeBytes) return;
    probe.at.push_back(memory->first + s.offset);
  }
  state_.backend->synchronize_device();
  for (std::size_t k = 0; k < op.touches.size(); ++k) {
    std::vector<std::byte>& bytes = probe.before.emplace_back(op.touch_spans[k].bytes);
    state_.backend->read_memory(bytes.data(), probe.at[k], bytes.size());
  }
  probe_ = std::move(probe);
}

void Context::end_probe() {
  if (!probe_) return;
  const TouchProbe probe = std::move(*probe_);
  probe_.reset();
  state_.backend->synchronize_device();
  OpRecord& op = logs_.ops.at(probe.seq);
  std::vector<uint32_t> unchanged;
  std::vector<ByteSpan> unchanged_spans;
  std::vector<std::byte> after;
  for (std::size_t k = 0; k < op.touches.size(); ++k) {
    after.resize(probe.before[k].size());
    state_.backend->read_memory(after.data(), probe.at[k], after.size());
    const uint32_t buffer = op.touches[k];
    const uint64_t base = op.touch_spans[k].offset;
    uint64_t from = 0;  // the next byte not yet named
    for (const Run& r : changed_runs(probe.before[k], after, base)) {
      if (r.begin > from) {
        unchanged.push_back(buffer);
        unchanged_spans.push_back(ByteSpan{base + from, r.begin - from});
      }
      op.writes.push_back(buffer);
      op.write_spans.push_back(ByteSpan{base + r.begin, r.end - r.begin});
      from = r.end;
    }
    if (from < after.size()) {
      unchanged.push_back(buffer);
      unchanged_spans.push_back(ByteSpan{base + from, after.size() - from});
    }
  }
  op.touches = std::move(unchanged);
  op.touch_spans = std::move(unchanged_spans);
  op.probed = true;
}

}  // namespace cprr

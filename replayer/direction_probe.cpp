#include "replayer/direction_probe.h"

#include <fmt/format.h>

#include <map>

namespace cprr {

namespace {

const std::vector<OpRecord>* ops_of(const ExecutionResult& e, std::size_t rank) {
  if (rank >= e.ranks.size() || !e.ranks[rank].done) return nullptr;
  return &e.ranks[rank].done->capture.ops;
}

// The ops of a log that had accesses of unknown direction: a probed one had them.
std::vector<std::size_t> opaque_ops(const std::vector<OpRecord>& ops) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].probed || !ops[i].touches.empty()) out.push_back(i);
  }
  return out;
}

// Whether the probe's op `p` is `t` as it ran in the probe: same op, same writes before the
// probe's, and its learned writes and unchanged bytes cover as many bytes of the same buffers as
// `t` is handed.
bool same_op(const OpRecord& p, const OpRecord& t) {
  if (!p.probed || t.probed || p.kind != t.kind || p.name != t.name) return false;
  if (p.writes.size() < t.writes.size() || p.write_spans.size() != p.writes.size()) return false;
  for (std::size_t k = 0; k < t.writes.size(); ++k) {
    if (p.writes[k] != t.writes[k]) return false;
  }
  std::map<uint32_t, uint64_t> handed, learned;
  for (std::size_t k = 0; k < t.touches.size() && k < t.touch_spans.size(); ++k) {
    handed[t.touches[k]] += t.touch_spans[k].bytes;
  }
  for (std::size_t k = t.writes.size(); k < p.writes.size(); ++k) {
    learned[p.writes[k]] += p.write_spans[k].bytes;
  }
  for (std::size_t k = 0; k < p.touches.size() && k < p.touch_spans.size(); ++k) {
    learned[p.touches[k]] += p.touch_spans[k].bytes;
  }
  return t.touch_spans.size() == t.touches.size() && handed == learned;
}

std::string buffer_name(const std::vector<AllocRecord>& allocs, uint32_t buffer) {
  for (const AllocRecord& a : allocs) {
    if (a.buffer == buffer && !a.is_free && !a.name.empty()) return a.name;
  }
  return fmt::format("buffer {}", buffer);
}

}  // namespace

bool has_unknown_directions(const ExecutionResult& e) {
  for (const RankReport& r : e.ranks) {
    if (!r.done) continue;
    for (const OpRecord& op : r.done->capture.ops) {
      if (!op.probed && !op.touches.empty()) return true;
    }
  }
  return false;
}

ProbeApplied apply_probe(const ExecutionResult& probe, ExecutionResult& target) {
  ProbeApplied applied;
  for (std::size_t r = 0; r < target.ranks.size(); ++r) {
    const std::vector<OpRecord>* probed = ops_of(probe, r);
    if (!probed || !target.ranks[r].done) continue;
    std::vector<OpRecord>& ops = target.ranks[r].done->capture.ops;
    const std::vector<std::size_t> from = opaque_ops(*probed), to = opaque_ops(ops);
    for (std::size_t k = 0; k < from.size() && k < to.size(); ++k) {
      const OpRecord& p = (*probed)[from[k]];
      OpRecord& t = ops[to[k]];
      if (!p.probed) continue;  // too large to copy, or a graph's: unknown still
      if (!same_op(p, t)) {
        if (applied.mismatch.empty()) {
          applied.mismatch = fmt::format(
              "rank {}: the probe's op #{} ({} '{}') is not op #{} ({} '{}') of the run", r, p.seq,
              p.kind, p.name, t.seq, t.kind, t.name);
        }
        break;
      }
      t.writes = p.writes;
      t.write_spans = p.write_spans;
      t.touches = p.touches;
      t.touch_spans = p.touch_spans;
      t.probed = true;
      ++applied.ops;
    }
  }
  return applied;
}

std::vector<std::string> describe_learned(const ExecutionResult& e, std::size_t limit) {
  std::vector<std::string> lines;
  std::size_t more = 0;
  for (std::size_t r = 0; r < e.ranks.size(); ++r) {
    if (!e.ranks[r].done) continue;
    const CaseCapture& c = e.ranks[r].done->capture;
    for (const OpRecord& op : c.ops) {
      if (!op.probed) continue;
      if (lines.size() == limit) {
        ++more;
        continue;
      }
      const auto spans = [&](const std::vector<uint32_t>& ids, const std::vector<ByteSpan>& s) {
        std::vector<std::string> parts;
        for (std::size_t k = 0; k < ids.size() && k < s.size(); ++k) {
          parts.push_back(fmt::format("'{}' [{}, {})", buffer_name(c.allocs, ids[k]), s[k].offset,
                                      s[k].offset + s[k].bytes));
        }
        return parts;
      };
      std::string line = fmt::format("rank {} op #{} ({} '{}'):", r, op.seq, op.kind, op.name);
      const auto wrote = spans(op.writes, op.write_spans);
      const auto kept = spans(op.touches, op.touch_spans);
      line += wrote.empty() ? " writes nothing it was handed"
                            : fmt::format(" writes {}", fmt::join(wrote, ", "));
      if (!kept.empty()) line += fmt::format("; leaves {} unchanged", fmt::join(kept, ", "));
      lines.push_back(std::move(line));
    }
  }
  if (more > 0) lines.push_back(fmt::format("and {} more op(s)", more));
  return lines;
}

}  // namespace cprr

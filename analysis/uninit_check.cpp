#include "analysis/uninit_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace cprr {
namespace {

/// Disjoint written byte ranges [begin, end) of one buffer, merged as they grow.
class Written {
 public:
  void add(uint64_t begin, uint64_t end) {
    if (begin >= end) return;
    auto it = spans_.upper_bound(begin);
    if (it != spans_.begin() && std::prev(it)->second >= begin) --it;
    while (it != spans_.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = spans_.erase(it);
    }
    spans_.emplace(begin, end);
  }
  /// The first sub-range of [begin, end) not written, if any.
  std::optional<std::pair<uint64_t, uint64_t>> first_gap(uint64_t begin, uint64_t end) const {
    uint64_t at = begin;
    auto it = spans_.upper_bound(at);
    if (it != spans_.begin()) --it;
    for (; it != spans_.end() && at < end; ++it) {
      if (it->second <= at) continue;
      if (it->first > at) return std::pair{at, std::min(it->first, end)};
      at = it->second;
    }
    if (at < end) return std::pair{at, end};
    return std::nullopt;
  }

 private:
  std::map<uint64_t, uint64_t> spans_;
};

ByteSpan span_at(const std::vector<ByteSpan>& spans, std::size_t k, uint64_t bytes) {
  return k < spans.size() ? spans[k] : ByteSpan{0, bytes};
}

}  // namespace

std::string UninitRead::describe() const {
  return fmt::format(
      "rank {} op #{} ({} '{}') reads bytes [{}, {}) of '{}' ({} pool), which nothing wrote since "
      "it was allocated",
      rank, op, op_kind, op_name, begin, end, buffer_name, pool);
}

std::optional<UninitRead> check_uninitialized_reads(const std::vector<const CaseCapture*>& ranks) {
  // Symmetric bytes any peer's put writes, per receiving rank: [begin, end) of its pool.
  std::map<int32_t, Written> put_into;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r]) continue;
    std::map<uint32_t, const AllocRecord*> allocs;
    for (const AllocRecord& a : ranks[r]->allocs) {
      if (!a.is_free) allocs[a.buffer] = &a;
    }
    for (const OpRecord& op : ranks[r]->ops) {
      if (op.kind != "put" || op.peer < 0) continue;
      for (std::size_t k = 0; k < op.writes.size(); ++k) {
        const auto it = allocs.find(op.writes[k]);
        if (it == allocs.end()) continue;
        const ByteSpan s = span_at(op.write_spans, k, it->second->bytes);
        put_into[op.peer].add(it->second->offset + s.offset,
                              it->second->offset + s.offset + s.bytes);
      }
    }
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    // Work outside the op log (an "unseen" op: a custom extension's kernel) may have written
    // what looks unwritten here: the race check's notes say it was not checked.
    if (!ranks[r] || std::any_of(ranks[r]->ops.begin(), ranks[r]->ops.end(),
                                 [](const OpRecord& op) { return op.kind == "unseen"; })) {
      continue;
    }
    const auto rank = static_cast<int32_t>(r);
    std::map<uint32_t, const AllocRecord*> allocs;
    for (const AllocRecord& a : ranks[r]->allocs) {
      if (!a.is_free) allocs[a.buffer] = &a;
    }
    std::map<uint32_t, Written> written;
    for (const auto& [id, a] : allocs) {
      // What peers put into this rank's window counts as written.
      if (a->pool != "symmetric") continue;
      const auto puts = put_into.find(rank);
      if (puts == put_into.end()) continue;
      for (uint64_t at = a->offset; at < a->offset + a->bytes;) {
        const auto gap = puts->second.first_gap(at, a->offset + a->bytes);
        const uint64_t covered_to = gap ? gap->first : a->offset + a->bytes;
        written[id].add(at - a->offset, covered_to - a->offset);
        at = gap ? gap->second : covered_to;
      }
    }
    for (const OpRecord& op : ranks[r]->ops) {
      for (std::size_t k = 0; k < op.reads.size(); ++k) {
        const auto it = allocs.find(op.reads[k]);
        // Host memory is written by plain host stores the log sees only when declared.
        if (it == allocs.end() || it->second->pool == "host") continue;
        const ByteSpan s = span_at(op.read_spans, k, it->second->bytes);
        if (const auto gap = written[op.reads[k]].first_gap(s.offset, s.offset + s.bytes)) {
          return UninitRead{rank,       op.seq,      op.stream,        op.kind,
                            op.name,    op.reads[k], it->second->name, it->second->pool,
                            gap->first, gap->second};
        }
      }
      if (op.kind == "put") continue;  // its writes are the peer's memory
      for (std::size_t k = 0; k < op.writes.size(); ++k) {
        const auto it = allocs.find(op.writes[k]);
        if (it == allocs.end()) continue;
        const ByteSpan s = span_at(op.write_spans, k, it->second->bytes);
        written[op.writes[k]].add(s.offset, s.offset + s.bytes);
      }
    }
  }
  return std::nullopt;
}

}  // namespace cprr

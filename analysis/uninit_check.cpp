#include "analysis/uninit_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace cprr {
namespace {

using Range = std::pair<uint64_t, uint64_t>;  // [begin, end)

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
  /// [begin, end) is never-written again (a copy brought never-written bytes there).
  void remove(uint64_t begin, uint64_t end) {
    if (begin >= end) return;
    auto it = spans_.upper_bound(begin);
    if (it != spans_.begin()) --it;
    while (it != spans_.end() && it->first < end) {
      const auto [b, e] = *it;
      if (e <= begin) {
        ++it;
        continue;
      }
      it = spans_.erase(it);
      if (b < begin) spans_.emplace(b, begin);
      if (e > end) spans_.emplace(end, e);
    }
  }
  /// The sub-ranges of [begin, end) not written, in order.
  std::vector<Range> gaps(uint64_t begin, uint64_t end) const {
    std::vector<Range> out;
    uint64_t at = begin;
    auto it = spans_.upper_bound(at);
    if (it != spans_.begin()) --it;
    for (; it != spans_.end() && at < end; ++it) {
      if (it->second <= at) continue;
      if (it->first > at) out.emplace_back(at, std::min(it->first, end));
      at = std::max(at, it->second);
    }
    if (at < end) out.emplace_back(at, end);
    return out;
  }

 private:
  std::map<uint64_t, uint64_t> spans_;
};

/// One buffer's bytes as the check follows them: which were written, and for never-written
/// ranges a copy brought in, how they came (latest copy first).
struct BufferBytes {
  Written written;
  std::map<uint64_t, std::pair<uint64_t, std::string>> copied;  // begin -> (end, how)

  std::string how(uint64_t at) const {
    auto it = copied.upper_bound(at);
    if (it == copied.begin()) return "";
    --it;
    return at < it->second.first ? it->second.second : "";
  }
  void copied_in(uint64_t begin, uint64_t end, const std::string& how) {
    written.remove(begin, end);
    for (auto it = copied.begin(); it != copied.end();) {
      it = it->first < end && begin < it->second.first ? copied.erase(it) : std::next(it);
    }
    copied.emplace(begin, std::pair{end, how});
  }
};

ByteSpan span_at(const std::vector<ByteSpan>& spans, std::size_t k, uint64_t bytes) {
  return k < spans.size() ? spans[k] : ByteSpan{0, bytes};
}

/// The live allocation of each buffer id of one rank's log.
std::map<uint32_t, const AllocRecord*> allocations(const CaseCapture& cap) {
  std::map<uint32_t, const AllocRecord*> allocs;
  for (const AllocRecord& a : cap.allocs) {
    if (!a.is_free) allocs[a.buffer] = &a;
  }
  return allocs;
}

/// Symmetric bytes any peer's put writes, per receiving rank: [begin, end) of its pool.
std::map<int32_t, Written> puts_into(const std::vector<const CaseCapture*>& ranks) {
  std::map<int32_t, Written> put_into;
  for (const CaseCapture* cap : ranks) {
    if (!cap) continue;
    const auto allocs = allocations(*cap);
    for (const OpRecord& op : cap->ops) {
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
  return put_into;
}

/// One rank's walk through its op log.
class RankWalk {
 public:
  RankWalk(int32_t rank, const CaseCapture& cap, const Written* puts)
      : rank_(rank), allocs_(allocations(cap)) {
    if (!puts) return;
    for (const auto& [id, a] : allocs_) {
      // What peers put into this rank's window counts as written.
      if (a->pool != "symmetric") continue;
      for (uint64_t at = a->offset; at < a->offset + a->bytes;) {
        const auto gaps = puts->gaps(at, a->offset + a->bytes);
        const uint64_t covered_to = gaps.empty() ? a->offset + a->bytes : gaps.front().first;
        bytes_[id].written.add(at - a->offset, covered_to - a->offset);
        at = gaps.empty() ? covered_to : gaps.front().second;
      }
    }
  }

  std::optional<UninitRead> step(const OpRecord& op) {
    if (op.moves) {
      move(op);
      return std::nullopt;
    }
    for (std::size_t k = 0; k < op.reads.size(); ++k) {
      const AllocRecord* a = checked(op.reads[k]);
      if (!a) continue;
      const ByteSpan s = span_at(op.read_spans, k, a->bytes);
      const BufferBytes& b = bytes_[op.reads[k]];
      const auto gaps = b.written.gaps(s.offset, s.offset + s.bytes);
      if (gaps.empty()) continue;
      return UninitRead{rank_,
                        op.seq,
                        op.stream,
                        op.kind,
                        op.name,
                        op.reads[k],
                        a->name,
                        a->pool,
                        gaps[0].first,
                        gaps[0].second,
                        b.how(gaps[0].first)};
    }
    if (op.kind == "put") return std::nullopt;  // its writes are the peer's memory
    for (std::size_t k = 0; k < op.writes.size(); ++k) {
      const auto it = allocs_.find(op.writes[k]);
      if (it == allocs_.end()) continue;
      const ByteSpan s = span_at(op.write_spans, k, it->second->bytes);
      bytes_[op.writes[k]].written.add(s.offset, s.offset + s.bytes);
    }
    return std::nullopt;
  }

 private:
  /// A tracked allocation whose bytes the check follows (host memory is written by plain host
  /// stores the log sees only when declared), or null.
  const AllocRecord* checked(uint32_t buffer) const {
    const auto it = allocs_.find(buffer);
    return it == allocs_.end() || it->second->pool == "host" ? nullptr : it->second;
  }

  /// A copy: its reads' spans laid end to end land on its writes' spans laid end to end, byte k
  /// at k * written / read (a cast changes the element size, not the order). Never-written read
  /// bytes land as never-written bytes, with how they came; the rest is written.
  void move(const OpRecord& op) {
    struct Undefined {
      uint64_t begin, end;  // in the reads laid end to end
      std::string how;
    };
    std::vector<Undefined> undefined;
    uint64_t read_total = 0;
    for (std::size_t k = 0; k < op.reads.size(); ++k) {
      const auto it = allocs_.find(op.reads[k]);
      const uint64_t whole = it == allocs_.end() ? 0 : it->second->bytes;
      const ByteSpan s = span_at(op.read_spans, k, whole);
      if (const AllocRecord* a = checked(op.reads[k])) {
        const BufferBytes& b = bytes_[op.reads[k]];
        for (const auto& [gb, ge] : b.written.gaps(s.offset, s.offset + s.bytes)) {
          const std::string before = b.how(gb);
          undefined.push_back(
              {read_total + gb - s.offset, read_total + ge - s.offset,
               fmt::format("copied by op #{} ({} '{}') from '{}'{}", op.seq, op.kind, op.name,
                           a->name, before.empty() ? "" : ", " + before)});
        }
      }
      read_total += s.bytes;
    }
    uint64_t write_total = 0;
    for (std::size_t k = 0; k < op.writes.size(); ++k) {
      const auto it = allocs_.find(op.writes[k]);
      write_total += span_at(op.write_spans, k, it == allocs_.end() ? 0 : it->second->bytes).bytes;
    }
    const auto scaled = [&](uint64_t at) {
      return read_total == 0
                 ? 0
                 : static_cast<uint64_t>(static_cast<long double>(at) * write_total / read_total);
    };
    uint64_t base = 0;
    for (std::size_t k = 0; k < op.writes.size(); ++k) {
      const auto it = allocs_.find(op.writes[k]);
      if (it == allocs_.end()) continue;
      const ByteSpan s = span_at(op.write_spans, k, it->second->bytes);
      BufferBytes& b = bytes_[op.writes[k]];
      b.written.add(s.offset, s.offset + s.bytes);
      for (const Undefined& u : undefined) {
        const uint64_t begin = std::max(scaled(u.begin), base);
        const uint64_t end = std::min(scaled(u.end), base + s.bytes);
        if (begin < end) b.copied_in(s.offset + begin - base, s.offset + end - base, u.how);
      }
      base += s.bytes;
    }
  }

  int32_t rank_;
  std::map<uint32_t, const AllocRecord*> allocs_;
  std::map<uint32_t, BufferBytes> bytes_;
};

}  // namespace

std::string UninitRead::describe() const {
  const std::string what = copied.empty() ? "which nothing wrote since it was allocated"
                                          : "never-written bytes " + copied;
  return fmt::format("rank {} op #{} ({} '{}') reads bytes [{}, {}) of '{}' ({} pool), {}", rank,
                     op, op_kind, op_name, begin, end, buffer_name, pool, what);
}

std::optional<UninitRead> check_uninitialized_reads(const std::vector<const CaseCapture*>& ranks) {
  const std::map<int32_t, Written> put_into = puts_into(ranks);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    // Work outside the op log (an "unseen" op: a custom extension's kernel) may have written
    // what looks unwritten here: the race check's notes say it was not checked.
    if (!ranks[r] || std::any_of(ranks[r]->ops.begin(), ranks[r]->ops.end(),
                                 [](const OpRecord& op) { return op.kind == "unseen"; })) {
      continue;
    }
    const auto rank = static_cast<int32_t>(r);
    const auto puts = put_into.find(rank);
    RankWalk walk(rank, *ranks[r], puts == put_into.end() ? nullptr : &puts->second);
    for (const OpRecord& op : ranks[r]->ops) {
      if (auto found = walk.step(op)) return found;
    }
  }
  return std::nullopt;
}

}  // namespace cprr

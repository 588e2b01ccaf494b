#include "analysis/uninit_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

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

/// Never-written bytes an op reads, at their place in its reads laid end to end, and how they
/// came there.
struct Undefined {
  uint64_t begin = 0, end = 0;
  std::string how;
  bool operator==(const Undefined&) const = default;
};

/// What a rank sends in a collective that only moves data: the never-written bytes of its
/// reads (laid end to end) and how many bytes it sends; an all-to-all's also how many to each
/// member (`chunks`, in group order).
struct Sent {
  std::vector<Undefined> undefined;
  uint64_t bytes = 0;
  std::vector<uint64_t> chunks;
  bool operator==(const Sent&) const = default;
};
/// Where bytes travel: a collective (its group, -1, -1, its number there) or a message (its
/// group, sender, receiver, its number on that channel).
using Channel = std::tuple<uint32_t, int32_t, int32_t, uint64_t>;
/// Per collective or message, what each rank of the world sent.
using Contributions = std::map<Channel, std::map<int32_t, Sent>>;

/// The collectives that only move bytes from rank to rank: their never-written inputs arrive as
/// never-written outputs (the read that uses them is the finding), as a copy carries them.
/// Python's calls are logged as ops named by the torch.distributed function; each is its
/// rank's next collective record of the kind the function makes.
std::string moving_kind(const OpRecord& op) {
  if (op.kind == "collective") {
    return op.name == "all_gather" || op.name == "broadcast" || op.name == "all_to_all_v" ? op.name
                                                                                          : "";
  }
  if (op.is_message()) return op.name.starts_with("send #") ? "send" : "recv";
  if (op.kind != "kernel" || !op.name.starts_with("dist.")) return "";
  const std::string function = op.name.substr(5, op.name.find_first_of("( ") - 5);
  if (function == "all_gather" || function == "all_gather_into_tensor" ||
      function == "_all_gather_base") {
    return "all_gather";
  }
  if (function == "all_to_all" || function == "all_to_all_single") return "all_to_all";
  if (function == "gather" || function == "scatter") return function;
  if (function == "batch_isend_irecv") return "batch";
  if (function == "send" || function == "isend") return "send";
  if (function == "recv" || function == "irecv") return "recv";
  return function == "broadcast" ? "broadcast" : "";
}

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

/// What crosses ranks in one walk: what every rank sent in each collective or message that
/// moves bytes (the last walk's `sent`), and where this walk's ranks record theirs.
struct Exchanges {
  const Contributions& incoming;
  Contributions& sent;
  int32_t world_size = 0;  ///< the world group's members: ranks 0 .. world_size - 1
};

/// A Case API op's collective or message record: (is a message, group, peer, kind, number); a
/// collective's peer is -1 and its kind empty (its op names group and number only).
using RecordKey = std::tuple<bool, uint32_t, int32_t, std::string, uint64_t>;

/// One rank's walk through its op log.
class RankWalk {
 public:
  RankWalk(int32_t rank, const CaseCapture& cap, const Written* puts, Exchanges exchanges)
      : rank_(rank), cap_(cap), allocs_(allocations(cap)), exchanges_(exchanges) {
    for (const CollectiveRecord& c : cap.collectives) {
      const bool message = c.is_p2p();
      numbered_.emplace(RecordKey{message, c.group, message ? c.peer : -1,
                                  message ? c.kind : std::string(), c.seq},
                        &c);
    }
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
    if (const std::string kind = moving_kind(op); kind == "batch") {
      batch(op);
      return std::nullopt;
    } else if (!kind.empty()) {
      exchange(op, kind);
      return std::nullopt;
    }
    std::optional<UninitRead> found = first_unwritten_read(op);
    if (op.kind == "put") return found;  // its writes are the peer's memory
    // Written even when the op read never-written bytes: the walk goes on (what later ops send
    // to other ranks), and only the first read is the finding, not what it computed.
    mark_written(op.writes, op.write_spans);
    // An access of unknown direction may write: taken as written, so no later read of its bytes
    // is named (a finding resting on a guess would be false as often as not), and never a read.
    // A probed op's touches are bytes a probe replay saw it leave unchanged, which a write of the
    // same values leaves too (a ReLU's zeros into zeroed memory): still taken as written.
    mark_written(op.touches, op.touch_spans);
    return found;
  }

 private:
  void mark_written(const std::vector<uint32_t>& ids, const std::vector<ByteSpan>& spans) {
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const auto it = allocs_.find(ids[k]);
      if (it == allocs_.end()) continue;
      const ByteSpan s = span_at(spans, k, it->second->bytes);
      bytes_[ids[k]].written.add(s.offset, s.offset + s.bytes);
    }
  }

  std::optional<UninitRead> first_unwritten_read(const OpRecord& op) {
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
    return std::nullopt;
  }

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
    const auto [undefined, read_total] = undefined_reads(op, [&](const AllocRecord& a) {
      return fmt::format("copied by op #{} ({} '{}') from '{}'", op.seq, op.kind, op.name, a.name);
    });
    const uint64_t write_total = written_bytes(op);
    const auto scaled = [&](uint64_t at) {
      return read_total == 0
                 ? 0
                 : static_cast<uint64_t>(static_cast<long double>(at) * write_total / read_total);
    };
    std::vector<Undefined> landed;
    for (const Undefined& u : undefined) landed.push_back({scaled(u.begin), scaled(u.end), u.how});
    land(op, landed);
  }

  /// A collective or message that moves bytes across ranks (moving_kind): what this rank sends
  /// is recorded; what it receives lands on its writes laid end to end: an all-gather's (and a
  /// gather's root's) part of each member in group order, a broadcast's root's bytes, an
  /// all-to-all's chunk of each member, a scatter's root's chunk for this rank, a message's
  /// sender's bytes (a batch of messages: batch).
  void exchange(const OpRecord& op, const std::string& kind) {
    const CollectiveRecord* record = record_of(op, kind);
    const std::vector<int32_t> members =
        record ? members_of(record->group) : std::vector<int32_t>{};
    // An all-to-all's chunks are in group order, which its record's per-peer sizes follow only
    // where the group's ranks ascend: elsewhere its writes are taken as written.
    const bool all_to_all = kind.starts_with("all_to_all");
    const bool by_chunk = all_to_all || kind == "scatter";  // the sender's bytes, per member
    if (record == nullptr || (by_chunk && !std::is_sorted(members.begin(), members.end()))) {
      land(op, {});
      return;
    }
    const bool message = record->is_p2p();
    const int32_t sender = !message ? -1 : kind == "send" ? rank_ : record->peer;
    const int32_t receiver = !message ? -1 : kind == "send" ? record->peer : rank_;
    const Channel key{record->group, sender, receiver, record->seq};
    auto [undefined, bytes] = undefined_reads(op, [&](const AllocRecord& a) {
      return message ? fmt::format("sent by rank {} in op #{} (send #{} to rank {}) from '{}'",
                                   rank_, op.seq, record->seq, receiver, a.name)
                     : fmt::format("sent by rank {} in op #{} ({} #{}) from '{}'", rank_, op.seq,
                                   kind, record->seq, a.name);
    });
    if (bytes > 0) {
      std::vector<uint64_t> chunks;  // an all-to-all's bytes to each member (even without sizes)
      if (all_to_all) {
        chunks = record->send_bytes;
        if (chunks.size() != members.size() && !members.empty()) {
          chunks.assign(members.size(), bytes / members.size());
        }
      } else if (kind == "scatter") {  // the root's list: the record's bytes to each member
        chunks.assign(members.size(), record->bytes);
      }
      exchanges_.sent[key][rank_] = Sent{std::move(undefined), bytes, std::move(chunks)};
    }
    const auto in = exchanges_.incoming.find(key);
    if (in == exchanges_.incoming.end() || kind == "send") {
      land(op, {});
      return;
    }
    std::vector<Undefined> landed;
    const auto from = [&](int32_t r) {
      const auto part = in->second.find(r);
      return part == in->second.end() ? nullptr : &part->second;  // null: taken as written
    };
    if (message) {
      if (const Sent* sent = from(sender)) landed = sent->undefined;
    } else if (kind == "broadcast") {
      if (const Sent* sent = from(record->root)) landed = sent->undefined;
    } else if (kind == "scatter") {
      landed = chunk_for_me(members, from(record->root));
    } else if (all_to_all) {
      landed = arriving_chunks(members, *record, from);
    } else {
      // Every member sends as many bytes (the record's); one that sent nothing checked (no
      // log, work outside it) still takes its place, its bytes taken as written.
      uint64_t at = 0;
      for (const int32_t member : members) {
        const Sent* part = from(member);
        if (part != nullptr) {
          for (const Undefined& u : part->undefined) {
            landed.push_back({at + u.begin, at + u.end, u.how});
          }
        }
        at += part != nullptr ? part->bytes : record->bytes;
      }
    }
    land(op, landed);
  }

  /// torch's batch_isend_irecv, logged as one op reading what it sends and writing what it
  /// receives: its k-th read is its k-th send (the rank's next send record), its k-th write its
  /// k-th receive (cprr.distributed.collectives enters every send, then every receive), each one
  /// message. (A send of no bytes has no read: the messages after it in the batch would pair with
  /// the wrong records. torch's P2POp lists rarely hold one.)
  void batch(const OpRecord& op) {
    for (std::size_t k = 0; k < op.reads.size(); ++k) {
      OpRecord one = op;
      one.reads = {op.reads[k]};
      one.read_spans = {span_at(op.read_spans, k, bytes_of(op.reads[k]))};
      one.writes.clear();
      one.write_spans.clear();
      exchange(one, "send");
    }
    for (std::size_t k = 0; k < op.writes.size(); ++k) {
      OpRecord one = op;
      one.reads.clear();
      one.read_spans.clear();
      one.writes = {op.writes[k]};
      one.write_spans = {span_at(op.write_spans, k, bytes_of(op.writes[k]))};
      exchange(one, "recv");
    }
  }

  uint64_t bytes_of(uint32_t buffer) const {
    const auto it = allocs_.find(buffer);
    return it == allocs_.end() ? 0 : it->second->bytes;
  }

  /// The never-written bytes of this rank's chunk of what `sent` sent (a scatter's root), as
  /// they land at the start of this rank's writes.
  std::vector<Undefined> chunk_for_me(const std::vector<int32_t>& members, const Sent* sent) const {
    const auto me = std::find(members.begin(), members.end(), rank_);
    if (sent == nullptr || me == members.end()) return {};
    const auto mine = static_cast<std::size_t>(me - members.begin());
    if (mine >= sent->chunks.size()) return {};
    uint64_t begin = 0;
    for (std::size_t j = 0; j < mine; ++j) begin += sent->chunks[j];
    const uint64_t end = begin + sent->chunks[mine];
    std::vector<Undefined> landed;
    for (const Undefined& u : sent->undefined) {
      const uint64_t b = std::max(u.begin, begin), e = std::min(u.end, end);
      if (b < e) landed.push_back({b - begin, e - begin, u.how});
    }
    return landed;
  }

  /// An all-to-all's never-written bytes as they land here: member i's chunk for this rank, at
  /// this rank's i-th chunk of its writes (its record's receive sizes, else even).
  template <class From>
  std::vector<Undefined> arriving_chunks(const std::vector<int32_t>& members,
                                         const CollectiveRecord& record, From from) const {
    const auto me = std::find(members.begin(), members.end(), rank_);
    if (me == members.end()) return {};
    const auto mine = static_cast<std::size_t>(me - members.begin());
    std::vector<Undefined> landed;
    uint64_t at = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const Sent* sent = from(members[i]);
      const uint64_t size = i < record.recv_bytes.size()         ? record.recv_bytes[i]
                            : sent && mine < sent->chunks.size() ? sent->chunks[mine]
                                                                 : 0;
      if (sent != nullptr && mine < sent->chunks.size()) {
        uint64_t begin = 0;
        for (std::size_t j = 0; j < mine; ++j) begin += sent->chunks[j];
        const uint64_t end = begin + std::min(size, sent->chunks[mine]);
        for (const Undefined& u : sent->undefined) {
          const uint64_t b = std::max(u.begin, begin), e = std::min(u.end, end);
          if (b < e) landed.push_back({at + b - begin, at + e - begin, u.how});
        }
      }
      at += size;
    }
    return landed;
  }

  /// The collective or message record of `op`: the Case API's collective op names its group
  /// (event) and number (epoch), its message op its peer, group and number; a Python call's is
  /// the rank's next record of its kind.
  const CollectiveRecord* record_of(const OpRecord& op, const std::string& kind) {
    if (op.kind == "collective" || op.is_message()) {
      const bool message = op.is_message();
      const auto it =
          numbered_.find(RecordKey{message, static_cast<uint32_t>(op.event), message ? op.peer : -1,
                                   message ? kind : std::string(), op.epoch});
      return it == numbered_.end() ? nullptr : it->second;
    }
    const auto& records = cap_.collectives;
    const bool message = kind == "send" || kind == "recv";
    for (; next_record_ < records.size(); ++next_record_) {
      const CollectiveRecord& c = records[next_record_];
      const bool same =
          message ? c.is_p2p() && c.kind == kind
                  : !c.is_p2p() &&
                        (c.kind == kind || (kind == "all_to_all" && c.kind == "all_to_all_v"));
      if (same) return &records[next_record_++];
    }
    return nullptr;
  }

  /// The never-written bytes of `op`'s reads, at their place in the reads laid end to end, each
  /// with `how(allocation)` and how they came there before; and the reads' total bytes.
  template <class How>
  std::pair<std::vector<Undefined>, uint64_t> undefined_reads(const OpRecord& op, How how) const {
    std::vector<Undefined> undefined;
    uint64_t total = 0;
    for (std::size_t k = 0; k < op.reads.size(); ++k) {
      const auto it = allocs_.find(op.reads[k]);
      const ByteSpan s = span_at(op.read_spans, k, it == allocs_.end() ? 0 : it->second->bytes);
      if (const AllocRecord* a = checked(op.reads[k])) {
        const auto b = bytes_.find(op.reads[k]);
        const auto gaps = b == bytes_.end() ? std::vector<Range>{{s.offset, s.offset + s.bytes}}
                                            : b->second.written.gaps(s.offset, s.offset + s.bytes);
        for (const auto& [gb, ge] : gaps) {
          const std::string before = b == bytes_.end() ? "" : b->second.how(gb);
          undefined.push_back({total + gb - s.offset, total + ge - s.offset,
                               how(*a) + (before.empty() ? "" : ", " + before)});
        }
      }
      total += s.bytes;
    }
    return {std::move(undefined), total};
  }

  uint64_t written_bytes(const OpRecord& op) const {
    uint64_t total = 0;
    for (std::size_t k = 0; k < op.writes.size(); ++k) {
      const auto it = allocs_.find(op.writes[k]);
      total += span_at(op.write_spans, k, it == allocs_.end() ? 0 : it->second->bytes).bytes;
    }
    return total;
  }

  /// `op`'s writes are written, but for `undefined` (places in its writes laid end to end),
  /// which are never-written bytes that came as each says.
  void land(const OpRecord& op, const std::vector<Undefined>& undefined) {
    uint64_t base = 0;
    for (std::size_t k = 0; k < op.writes.size(); ++k) {
      const auto it = allocs_.find(op.writes[k]);
      if (it == allocs_.end()) continue;
      const ByteSpan s = span_at(op.write_spans, k, it->second->bytes);
      BufferBytes& b = bytes_[op.writes[k]];
      b.written.add(s.offset, s.offset + s.bytes);
      for (const Undefined& u : undefined) {
        const uint64_t begin = std::max(u.begin, base);
        const uint64_t end = std::min(u.end, base + s.bytes);
        if (begin < end) b.copied_in(s.offset + begin - base, s.offset + end - base, u.how);
      }
      base += s.bytes;
    }
  }

  /// A group's ranks of the world in group-rank order (the world: every rank with a log).
  std::vector<int32_t> members_of(uint32_t group) const {
    for (const GroupRecord& g : cap_.groups) {
      if (g.id == group) return g.ranks;
    }
    std::vector<int32_t> all;
    if (group == 0) {
      for (int32_t r = 0; r < exchanges_.world_size; ++r) all.push_back(r);
    }
    return all;
  }

  int32_t rank_;
  const CaseCapture& cap_;
  std::map<uint32_t, const AllocRecord*> allocs_;
  std::map<uint32_t, BufferBytes> bytes_;
  Exchanges exchanges_;
  std::map<RecordKey, const CollectiveRecord*> numbered_;  ///< the Case API ops' records
  std::size_t next_record_ = 0;  ///< record_of's place among a Python rank's collective records
};

}  // namespace

std::string UninitRead::describe() const {
  const std::string what = copied.empty() ? "which nothing wrote since it was allocated"
                                          : "never-written bytes " + copied;
  const std::string others =
      same_on_ranks.empty()
          ? ""
          : fmt::format(" (the same read on rank{} {})", same_on_ranks.size() > 1 ? "s" : "",
                        fmt::join(same_on_ranks, ", "));
  return fmt::format("rank {} op #{} ({} '{}') reads bytes [{}, {}) of '{}' ({} pool), {}{}", rank,
                     op, op_kind, op_name, begin, end, buffer_name, pool, what, others);
}

namespace {

/// One walk over every checked rank's log with what the ranks sent in the last walk; returns
/// its findings (the first read of each buffer on each rank, lowest rank then issue order) and
/// what the ranks sent in this one.
std::vector<UninitRead> walk_ranks(const std::vector<const CaseCapture*>& ranks,
                                   const std::map<int32_t, Written>& put_into,
                                   const Contributions& incoming, Contributions& sent) {
  std::vector<UninitRead> found;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    // Work outside the op log (an "unseen" op: a custom extension's kernel) may have written
    // what looks unwritten here: the race check's notes say it was not checked.
    if (!ranks[r] || std::any_of(ranks[r]->ops.begin(), ranks[r]->ops.end(),
                                 [](const OpRecord& op) { return op.kind == "unseen"; })) {
      continue;
    }
    const auto rank = static_cast<int32_t>(r);
    const auto puts = put_into.find(rank);
    RankWalk walk(rank, *ranks[r], puts == put_into.end() ? nullptr : &puts->second,
                  Exchanges{incoming, sent, static_cast<int32_t>(ranks.size())});
    std::set<uint32_t> named;  // buffers already found read on this rank
    for (const OpRecord& op : ranks[r]->ops) {
      auto read = walk.step(op);
      if (read && named.insert(read->buffer).second) found.push_back(std::move(*read));
    }
  }
  return found;
}

}  // namespace

std::vector<UninitRead> uninitialized_reads(const std::vector<const CaseCapture*>& ranks,
                                            std::size_t limit) {
  const std::map<int32_t, Written> put_into = puts_into(ranks);
  // Never-written bytes a collective moves reach other ranks, which may send them on: walk
  // again with what the last walk's ranks sent until nothing new travels (each walk can only
  // carry more, and a chain is at most as long as the collectives).
  Contributions incoming;
  for (int walks = 0;; ++walks) {
    Contributions sent;
    auto found = walk_ranks(ranks, put_into, incoming, sent);
    if (sent == incoming || walks >= 16) {
      std::vector<UninitRead> folded;
      for (UninitRead& read : found) {
        const auto same = std::find_if(folded.begin(), folded.end(), [&](const UninitRead& f) {
          return std::tie(f.op_kind, f.op_name, f.buffer_name, f.begin, f.end, f.copied) ==
                 std::tie(read.op_kind, read.op_name, read.buffer_name, read.begin, read.end,
                          read.copied);
        });
        if (same != folded.end()) {
          same->same_on_ranks.push_back(read.rank);
        } else if (folded.size() < limit) {
          folded.push_back(std::move(read));
        }
      }
      return folded;
    }
    incoming = std::move(sent);
  }
}

std::optional<UninitRead> check_uninitialized_reads(const std::vector<const CaseCapture*>& ranks) {
  auto found = uninitialized_reads(ranks, 1);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

}  // namespace cprr

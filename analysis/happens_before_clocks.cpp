#include "analysis/happens_before_clocks.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <tuple>
#include <utility>

namespace cprr {

namespace {

std::string op_label(OpId id, const HbOp& op) {
  return fmt::format("rank {} op #{} ({} '{}')", id.rank, op.seq, op.kind, op.name);
}

}  // namespace

/// Walks one rank's ops in issue order, keeping what the next op is ordered after: the host's
/// last node, each stream's last node and each event's last record.
class HbClocks::RankBuilder {
 public:
  RankBuilder(HbClocks& g, int32_t rank) : g_(g), rank_(rank), host_(g.threads_++) {}

  void add(uint32_t index, const HbOp& op) {
    const OpId id{rank_, index};
    const uint32_t thread = op.stream < 0 ? host_ : stream_thread(op.stream);
    std::vector<uint32_t> preds = issue_preds(op);
    if (op.role == SyncRole::wait) add_event_pred(id, op, preds);
    if (op.role == SyncRole::host_join_all) {
      for (const auto& [stream, tail] : stream_tail_) preds.push_back(tail);
    }
    Span span;
    span.start = span.end = g_.add_node(thread, std::move(preds), id);
    if (op.role == SyncRole::collective) {
      // The completion is a second node on the same stream; link_collectives adds every rank's
      // entry to its predecessors.
      span.end = g_.add_node(thread, {span.start}, id);
      g_.collectives_.push_back(
          {op.communicator, op.sender, op.receiver, op.collective_seq, span.start, span.end});
    }
    if (op.role == SyncRole::record) recorded_[op.event] = span.end;
    if (op.role == SyncRole::signal) g_.signal_ops_.push_back(id);
    if (op.role == SyncRole::wait_signal) g_.signal_waits_.push_back(id);
    if (op.stream < 0) {
      host_tail_ = span.end;
    } else {
      stream_tail_[op.stream] = span.end;
      if (op.role == SyncRole::host_join || op.role == SyncRole::host_join_all)
        join_host(id, span.end);
    }
    g_.spans_[rank_].push_back(span);
  }

 private:
  uint32_t stream_thread(int32_t stream) {
    auto [it, fresh] = stream_threads_.try_emplace(stream, 0);
    if (fresh) it->second = g_.threads_++;
    return it->second;
  }

  // Stream order and host issue order: the op follows its stream's last op and everything the
  // host did before issuing it.
  std::vector<uint32_t> issue_preds(const HbOp& op) const {
    std::vector<uint32_t> preds;
    if (host_tail_ >= 0) preds.push_back(static_cast<uint32_t>(host_tail_));
    if (op.stream >= 0) {
      auto it = stream_tail_.find(op.stream);
      if (it != stream_tail_.end()) preds.push_back(it->second);
    }
    return preds;
  }

  // A wait orders after the event's last record issued before it; an event never recorded is
  // complete at once (CUDA's rule), so it orders nothing.
  void add_event_pred(OpId id, const HbOp& op, std::vector<uint32_t>& preds) {
    auto it = recorded_.find(op.event);
    if (it != recorded_.end()) {
      preds.push_back(it->second);
      return;
    }
    g_.notes_.push_back(
        fmt::format("{} waits for event {}, which was not recorded before it: "
                    "the wait orders nothing",
                    op_label(id, op), op.event));
  }

  void join_host(OpId id, uint32_t stream_node) {
    std::vector<uint32_t> preds{stream_node};
    if (host_tail_ >= 0) preds.push_back(static_cast<uint32_t>(host_tail_));
    host_tail_ = g_.add_node(host_, std::move(preds), id);
  }

  HbClocks& g_;
  int32_t rank_;
  uint32_t host_;
  int64_t host_tail_ = -1;
  std::map<int32_t, uint32_t> stream_threads_;
  std::map<int32_t, uint32_t> stream_tail_;
  std::map<int64_t, uint32_t> recorded_;
};

HbClocks::HbClocks(const std::vector<RankOps>& ranks) {
  spans_.resize(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    RankBuilder builder(*this, static_cast<int32_t>(r));
    for (std::size_t i = 0; i < ranks[r].size(); ++i) {
      builder.add(static_cast<uint32_t>(i), ranks[r][i]);
    }
  }
  link_collectives();
  link_signals(ranks);
  compute_clocks(ranks);
}

uint32_t HbClocks::add_node(uint32_t thread, std::vector<uint32_t> preds, OpId op) {
  nodes_.push_back(Node{thread, std::move(preds), op});
  return static_cast<uint32_t>(nodes_.size() - 1);
}

// A collective completes on each rank only after every rank entered it, so each completion node
// follows the entry nodes of all sides with the same (communicator, number). A message is a
// collective of its two ends: a recv completes once its send was issued, and a send once its
// recv was (sends wait to be received), matched on (communicator, sender, receiver, number).
void HbClocks::link_collectives() {
  using Key = std::tuple<int32_t, int32_t, int32_t, uint64_t>;
  std::map<Key, std::vector<uint32_t>> entries;
  const auto key = [](const CollectiveSide& c) {
    return Key{c.communicator, c.sender, c.receiver, c.seq};
  };
  for (const CollectiveSide& c : collectives_) entries[key(c)].push_back(c.entry);
  for (const CollectiveSide& c : collectives_) {
    const std::vector<uint32_t>& all = entries[key(c)];
    std::vector<uint32_t>& preds = nodes_[c.completion].preds;
    preds.insert(preds.end(), all.begin(), all.end());
  }
}

// A wait_signal for epoch k follows the signal that raised the semaphore to the smallest epoch
// >= k (semaphores only grow, so that is the first signal that releases the wait).
void HbClocks::link_signals(const std::vector<RankOps>& ranks) {
  std::map<uint32_t, std::map<uint64_t, OpId>> signals;
  for (OpId id : signal_ops_) {
    const HbOp& op = ranks[id.rank][id.index];
    auto [it, fresh] = signals[op.semaphore].try_emplace(op.epoch, id);
    if (!fresh) {
      notes_.push_back(
          fmt::format("{} signals semaphore {} epoch {} again (first: {}): waits "
                      "are ordered after the first",
                      op_label(id, op), op.semaphore, op.epoch,
                      op_label(it->second, ranks[it->second.rank][it->second.index])));
    }
  }
  for (OpId id : signal_waits_) {
    const HbOp& op = ranks[id.rank][id.index];
    const auto& by_epoch = signals[op.semaphore];
    auto it = by_epoch.lower_bound(op.epoch);
    if (it == by_epoch.end()) {
      notes_.push_back(
          fmt::format("{} waits for semaphore {} epoch {}, which no op signals: "
                      "the wait orders nothing",
                      op_label(id, op), op.semaphore, op.epoch));
      continue;
    }
    const Span waiter = spans_[id.rank][id.index];
    nodes_[waiter.start].preds.push_back(spans_[it->second.rank][it->second.index].end);
  }
}

// Kahn's algorithm, lowest node first, so the result does not depend on container order. A
// cycle (ranks waiting on each other: an execution that could not have finished) is broken at
// its lowest node, which then joins only the predecessors already stamped.
void HbClocks::compute_clocks(const std::vector<RankOps>& ranks) {
  const std::size_t n = nodes_.size();
  clocks_.assign(n * threads_, 0);
  std::vector<std::vector<uint32_t>> succs(n);
  std::vector<uint32_t> missing(n, 0);
  for (uint32_t v = 0; v < n; ++v) {
    for (uint32_t p : nodes_[v].preds) succs[p].push_back(v);
    missing[v] = static_cast<uint32_t>(nodes_[v].preds.size());
  }
  std::vector<bool> done(n, false);
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
  for (uint32_t v = 0; v < n; ++v) {
    if (missing[v] == 0) ready.push(v);
  }
  std::size_t stamped = 0;
  uint32_t scan = 0;  // lowest node that may still be unstamped, for breaking cycles
  while (stamped < n) {
    if (ready.empty()) {
      while (done[scan]) ++scan;
      const OpId id = nodes_[scan].op;
      notes_.push_back(
          fmt::format("{} is part of a cycle of waits (an execution that could not "
                      "finish): its order is approximate",
                      op_label(id, ranks[id.rank][id.index])));
      ready.push(scan);
    }
    const uint32_t v = ready.top();
    ready.pop();
    if (done[v]) continue;
    stamp(v);
    done[v] = true;
    ++stamped;
    for (uint32_t s : succs[v]) {
      if (--missing[s] == 0 && !done[s]) ready.push(s);
    }
  }
}

// A node's clock: the join of its predecessors' clocks, one tick on its own thread.
void HbClocks::stamp(uint32_t node) {
  uint32_t* mine = &clocks_[node * threads_];
  for (uint32_t p : nodes_[node].preds) {
    const uint32_t* theirs = &clocks_[p * threads_];
    for (uint32_t t = 0; t < threads_; ++t) mine[t] = std::max(mine[t], theirs[t]);
  }
  ++mine[nodes_[node].thread];
}

bool HbClocks::before(OpId a, OpId b) const {
  if (a.rank == b.rank && a.index == b.index) return false;
  const uint32_t a_end = spans_[a.rank][a.index].end;
  const uint32_t b_start = spans_[b.rank][b.index].start;
  const uint32_t thread = nodes_[a_end].thread;
  return clock(b_start, thread) >= clock(a_end, thread);
}

}  // namespace cprr

#include "analysis/race_fix.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace cprr {

namespace {

bool same_op(OpId a, OpId b) { return a.rank == b.rank && a.index == b.index; }

bool in_group(const OrientedPair& p, OpId later, uint32_t buffer) {
  return same_op(p.second, later) && std::find(p.second_buffers.begin(), p.second_buffers.end(),
                                               buffer) != p.second_buffers.end();
}

HbOp sync_op(const HbOp& near, int32_t stream, SyncRole role) {
  HbOp op;
  op.seq = near.seq;  // a report never names these; the neighbour's number keeps logs sorted
  op.stream = stream;
  op.kind = "fix";
  op.name = "fix";
  op.role = role;
  return op;
}

/// A copy of the log with the fix's ops inserted, and where each original op went.
class FixedLog {
 public:
  explicit FixedLog(const std::vector<RankOps>& ranks)
      : ranks_(ranks), after_(ranks.size()), before_(ranks.size()) {
    // Fresh ids: events are per rank, semaphores world-wide.
    for (const RankOps& ops : ranks) {
      int64_t next_event = 0;
      for (const HbOp& op : ops) {
        next_event = std::max(next_event, op.event + 1);
        next_semaphore_ = std::max<uint64_t>(next_semaphore_, uint64_t{op.semaphore} + 1);
      }
      next_event_.push_back(next_event);
    }
  }

  /// Orders `later` after `x`, the way its threads allow.
  void order(OpId x, OpId later) {
    const HbOp& first = ranks_[x.rank][x.index];
    const HbOp& second = ranks_[later.rank][later.index];
    if (x.rank != later.rank) {
      const auto semaphore = static_cast<uint32_t>(next_semaphore_++);
      HbOp signal = sync_op(first, first.stream, SyncRole::signal);
      HbOp wait = sync_op(second, second.stream, SyncRole::wait_signal);
      signal.semaphore = wait.semaphore = semaphore;
      signal.epoch = wait.epoch = 1;
      after_[x.rank][x.index].push_back(std::move(signal));
      before_[later.rank][later.index].push_back(std::move(wait));
    } else if (second.stream < 0) {
      // The host synchronizes the first op's stream: issued after it, so it covers it.
      before_[later.rank][later.index].push_back(
          sync_op(second, first.stream, SyncRole::host_join));
    } else {
      const int64_t event = next_event_[x.rank]++;
      HbOp record = sync_op(first, first.stream, SyncRole::record);
      HbOp wait = sync_op(second, second.stream, SyncRole::wait);
      record.event = wait.event = event;
      after_[x.rank][x.index].push_back(std::move(record));
      before_[later.rank][later.index].push_back(std::move(wait));
    }
  }

  /// The log with every insertion; `moved(id)` then says where an original op is.
  std::vector<RankOps> build() {
    std::vector<RankOps> out(ranks_.size());
    index_.assign(ranks_.size(), {});
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      for (uint32_t i = 0; i < ranks_[r].size(); ++i) {
        for (HbOp& op : before_[r][i]) out[r].push_back(std::move(op));
        index_[r].push_back(static_cast<uint32_t>(out[r].size()));
        out[r].push_back(ranks_[r][i]);
        for (HbOp& op : after_[r][i]) out[r].push_back(std::move(op));
      }
    }
    return out;
  }

  OpId moved(OpId id) const { return OpId{id.rank, index_[id.rank][id.index]}; }

 private:
  const std::vector<RankOps>& ranks_;
  std::vector<std::map<uint32_t, std::vector<HbOp>>> after_;
  std::vector<std::map<uint32_t, std::vector<HbOp>>> before_;
  std::vector<std::vector<uint32_t>> index_;
  uint64_t next_semaphore_ = 0;
  std::vector<int64_t> next_event_;
};

}  // namespace

FixPlan plan_fix(const std::vector<RankOps>& ranks, const std::vector<OrientedPair>& pairs,
                 OpId later, uint32_t buffer) {
  FixPlan plan;
  // The group's latest op per (rank, stream): issue order on one stream is its stream order.
  std::map<std::pair<int32_t, int32_t>, OpId> latest;
  std::vector<OpId> firsts;
  for (const OrientedPair& p : pairs) {
    if (!in_group(p, later, buffer)) continue;
    ++plan.group_pairs;
    firsts.push_back(p.first);
    const std::pair<int32_t, int32_t> thread{p.first.rank,
                                             ranks[p.first.rank][p.first.index].stream};
    auto [it, fresh] = latest.try_emplace(thread, p.first);
    if (!fresh && it->second.index < p.first.index) it->second = p.first;
  }
  FixedLog fixed(ranks);
  for (const auto& [thread, x] : latest) {
    plan.after.push_back(x);
    fixed.order(x, later);
  }
  std::sort(plan.after.begin(), plan.after.end(),
            [](OpId a, OpId b) { return std::tie(a.rank, a.index) < std::tie(b.rank, b.index); });
  const HbClocks clocks(fixed.build());
  plan.verified = !firsts.empty() && std::all_of(firsts.begin(), firsts.end(), [&](OpId x) {
    return clocks.before(fixed.moved(x), fixed.moved(later));
  });
  return plan;
}

}  // namespace cprr

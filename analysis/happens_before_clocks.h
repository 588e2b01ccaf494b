#pragma once
// The ordering half of the happens-before check (analysis/happens_before.h): every op of every
// rank as a node of one graph whose edges are the execution's ordering guarantees, and a vector
// clock per node. Each host thread and stream is a chain in that graph, so comparing one clock
// component answers "is there a path" exactly.
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/happens_before.h"

namespace cprr {

/// An op by position: its rank and its index in that rank's RankOps.
struct OpId {
  int32_t rank = 0;
  uint32_t index = 0;
};

/// The happens-before order of one execution's ops.
class HbClocks {
 public:
  /// Builds the order of `ranks` (index = rank); nothing of `ranks` is kept.
  explicit HbClocks(const std::vector<RankOps>& ranks);

  /// True when `a` completes before `b` starts on every schedule the edges allow. An op is never
  /// before itself; a collective spans from its entry to its completion.
  bool before(OpId a, OpId b) const;

  /// Log facts that weaken the order: waits for events never recorded, waits for signals nobody
  /// sends, duplicate signals, cycles (a log of an execution that could not finish).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  struct Node {
    uint32_t thread = 0;
    std::vector<uint32_t> preds;
    OpId op;  ///< the op this node belongs to (host join nodes: the op that joined)
  };
  /// An op's first and last node: equal except for collectives (entry, completion).
  struct Span {
    uint32_t start = 0;
    uint32_t end = 0;
  };
  class RankBuilder;

  uint32_t add_node(uint32_t thread, std::vector<uint32_t> preds, OpId op);
  void link_collectives();
  void link_signals(const std::vector<RankOps>& ranks);
  void compute_clocks(const std::vector<RankOps>& ranks);
  void stamp(uint32_t node);
  uint32_t clock(uint32_t node, uint32_t thread) const { return clocks_[node * threads_ + thread]; }

  std::vector<Node> nodes_;
  std::vector<std::vector<Span>> spans_;  ///< [rank][op index]
  uint32_t threads_ = 0;
  std::vector<uint32_t> clocks_;  ///< nodes_.size() x threads_, row-major
  std::vector<std::string> notes_;
  // Cross-rank edges found while building, resolved once every rank is built.
  struct CollectiveSide {
    int32_t communicator;
    int32_t sender;  ///< a message's ends; -1 for a collective
    int32_t receiver;
    uint64_t seq;
    uint32_t entry;
    uint32_t completion;
  };
  std::vector<CollectiveSide> collectives_;
  std::vector<OpId> signal_ops_;
  std::vector<OpId> signal_waits_;
};

}  // namespace cprr

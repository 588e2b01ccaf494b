#pragma once
// What a case does that its op log cannot see, counted so the report names it:
// python/cprr/capture/outside.py in C++ (which says why). As a scope: torch's own work for
// something cprr logged, which neither the trace hooks nor CUPTI may count.
#include <cstdint>
#include <map>
#include <string>

#include "python/native/capture/op_sink.h"

namespace cprr::python::capture {

class Outside {
 public:
  explicit Outside(OpSink& sink) : sink_(sink) {}

  void enter() {
    ++depth_;
    sink_.seen_enter();
  }
  void leave() {
    --depth_;
    sink_.seen_leave();
  }
  bool inside() const { return depth_ > 0; }
  /// Work the op log cannot see, pending until the next op tells whether it was that op's own.
  void count(const std::string& what) { ++pending_[what]; }
  /// An op begins (or the case ends); `lifts`: it is torch.tensor(data)'s lift, and what was
  /// pending was that constructor's.
  void settle(bool lifts);
  std::map<std::string, int64_t>& counts() { return counts_; }

 private:
  OpSink& sink_;
  int depth_ = 0;
  std::map<std::string, int64_t> counts_;
  std::map<std::string, int64_t> pending_;
};

/// Outside's scope, for the length of a block.
class InsideOp {
 public:
  explicit InsideOp(Outside& o) : o_(o) { o_.enter(); }
  ~InsideOp() { o_.leave(); }
  InsideOp(const InsideOp&) = delete;
  InsideOp& operator=(const InsideOp&) = delete;

 private:
  Outside& o_;
};

inline void Outside::settle(bool lifts) {
  if (lifts) {
    pending_.clear();
    sink_.unseen_forgive();
    return;
  }
  for (const auto& [what, n] : pending_) counts_[what] += n;
  pending_.clear();
}

}  // namespace cprr::python::capture

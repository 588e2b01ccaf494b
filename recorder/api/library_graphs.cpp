#include "recorder/api/library_graphs.h"

#include <utility>

#include "runtime/error.h"

namespace cprr {

void LibraryGraphs::begin(int stream) {
  if (open_) {
    CPRR_THROW_AS(CaseFailure,
                  "a CUDA graph capture begins on stream {} while one is open on stream {}: "
                  "cprr models one capture at a time",
                  stream, *open_->streams.begin());
  }
  open_.emplace();
  open_->streams.insert(stream);
}

uint32_t LibraryGraphs::end(int stream) {
  if (!holds(stream)) {
    CPRR_THROW_AS(CaseFailure, "a CUDA graph capture ends on stream {}, where none is open",
                  stream);
  }
  graphs_.push_back(std::move(open_->ops));
  open_.reset();
  return static_cast<uint32_t>(graphs_.size() - 1);
}

bool LibraryGraphs::holds(int stream) const { return open_ && open_->streams.count(stream) > 0; }

bool LibraryGraphs::order(const std::string& kind, int stream, int64_t event) {
  if (!open_) return false;
  if (kind == "record" && holds(stream)) {
    open_->events.insert(event);
    return true;
  }
  // A stream that waits for an event recorded inside the capture is captured from then on.
  if (kind == "wait" && stream >= 0 && open_->events.count(event) > 0) {
    open_->streams.insert(stream);
    return true;
  }
  return kind == "wait" && holds(stream);
}

void LibraryGraphs::hold(OpRecord op) {
  if (!open_) CPRR_THROW("an op is held for a CUDA graph while no capture is open");
  open_->ops.push_back(std::move(op));
}

OpRecord* LibraryGraphs::held(uint64_t seq) {
  if (!open_) return nullptr;
  // The op asked for is the last one held, or close to it (a tensor it made, tracked).
  for (auto it = open_->ops.rbegin(); it != open_->ops.rend(); ++it) {
    if (it->seq == seq) return &*it;
  }
  return nullptr;
}

const std::vector<OpRecord>* LibraryGraphs::ops(uint32_t graph) const {
  return graph < graphs_.size() ? &graphs_[graph] : nullptr;
}

}  // namespace cprr

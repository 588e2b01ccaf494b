#pragma once
// CUDA graphs of a case's library (torch.cuda.CUDAGraph): the ops a stream capture enqueues do
// not run when they are issued but at each launch of the graph, on the launch's stream. So the
// op log must not take them where they are issued (a race check would order them there, and a
// replay's delay or host sync there would break the capture); it takes them at each launch.
//
// While a capture is open, the ops of its stream, and of every stream that joins it by waiting
// for an event recorded inside it (CUDA's fork into a capture), are held here as the graph's, in
// issue order; LibraryHooks logs a "captured" op in their place, which touches nothing. A launch
// logs the held ops again, on the launch stream in capture order: what is outside the graph is
// ordered with it as CUDA orders it, while the graph's own ops are taken as one stream (a race
// between two branches of one graph is not modelled). Ordering ops inside the graph are its own:
// they only decide which streams join it, and are not held.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "data/capture.h"

namespace cprr {

class LibraryGraphs {
 public:
  /// A capture begins on `stream` (an op-log stream). One capture at a time.
  void begin(int stream);
  /// The capture open on `stream` ends: its held ops become graph number N (returned), from 0.
  uint32_t end(int stream);
  /// Whether an op on `stream` belongs to the open capture.
  bool holds(int stream) const;
  /// Whether a capture is open (a device-wide sync now would invalidate it).
  bool capturing() const { return open_.has_value(); }
  /// An ordering op (record | wait | sync) about to be logged; whether it belongs to the open
  /// capture (a wait for an event recorded inside makes its stream join).
  bool order(const std::string& kind, int stream, int64_t event);
  /// Holds `op` as the open capture's next op; `op.seq` is the seq of the "captured" op logged
  /// in its place.
  void hold(OpRecord op);
  /// The held op of the open capture logged as `seq`, or nullptr.
  OpRecord* held(uint64_t seq);
  /// Graph `graph`'s ops (nullptr: no such graph in this case).
  const std::vector<OpRecord>* ops(uint32_t graph) const;

 private:
  struct Open {
    std::set<int> streams;
    std::set<int64_t> events;  ///< recorded inside the capture
    std::vector<OpRecord> ops;
  };
  std::optional<Open> open_;
  std::vector<std::vector<OpRecord>> graphs_;
};

}  // namespace cprr

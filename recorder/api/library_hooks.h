#pragma once
// The Python runtime's hooks into a running case (python/native/rank_runtime.cpp): what a case's
// own library (torch) does instead of going through the Case API, reported so the logs stay
// complete: its captures, its collectives' progress for the watchdog and the flight record, its
// memory and its ops for the op log. No part of the Case API: a case author's <cprr/case.h> does
// not include it, and the package does not install it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/capture.h"
#include "recorder/api/context.h"
#include "recorder/api/launch_params.h"
#include "recorder/api/library_memory.h"
#include "runtime/dtype.h"

namespace cprr {

/// The hooks of one Context, for its case's library; valid while the Context is. Context names
/// this class its friend: the hooks append to the logs, counters and captures it keeps private,
/// and one friend declaration reaches them where an accessor per field would widen Context's
/// interface for every case author. Not thread-safe: call it from the case body's thread.
class LibraryHooks {
 public:
  explicit LibraryHooks(Context& ctx) : ctx_(ctx) {}

  /// Hashes `bytes` at `data` (memory the case did not get from alloc: a tensor) as an output or
  /// probe. Device memory on a device backend is hashed on the device after the work `native` (a
  /// cudaStream_t; nullptr: the device's legacy stream) enqueued so far, and `native`'s later
  /// work waits for the hash; `host` memory (and any on the CPU backend) is hashed before this
  /// returns. Logged as an op of stream 0.
  void capture_memory(bool is_output, std::string name, const std::byte* data, uint64_t bytes,
                      DType dtype, std::vector<int64_t> shape, void* native = nullptr,
                      bool host = false);
  /// A collective the case's library is about to call (`c`: its fingerprint, its group and
  /// members, its caller's line; `c.stream` the op-log stream, the library's, see library_op):
  /// numbered among its group's collectives, written to the flight record before the call (so a
  /// mismatch that aborts or hangs is still named), and reported by the watchdog as entered.
  /// A send or recv (`c.peer` a rank of the world) is numbered on its channel (group, sender,
  /// receiver), where the checks match each recv with its send, and is a host op of the op log.
  /// Returns a handle for complete_collective.
  uint64_t enter_collective(CollectiveRecord c);
  /// The call enter_collective returned `handle` for returned (the watchdog reports
  /// it as completed).
  void complete_collective(uint64_t handle);
  /// The call enter_collective returned `handle` for raised (a timeout the case expects, as in a
  /// test of timeouts): if the case then ends clean on this rank, the call is no collective of
  /// its log (Context::finish drops it and renumbers what followed on its channel), so the
  /// peers that never called it are no mismatch. Where the rank fails, it stays: the failure's
  /// evidence (a size mismatch gloo raised on).
  void collective_raised(uint64_t handle);
  /// A group other than the world the case's collectives use or the case made: recorded once
  /// per case (by id).
  void note_group(GroupRecord group);
  /// Memory the case's library allocated (a tensor): in the allocation log as pool "tensor", its
  /// address as the offset, so the race and uninitialized-read checks cover it. `written_by`: the
  /// library op (its seq) that made it and wrote all of it; -1 for memory nobody wrote
  /// (torch.empty), which a replay that poisons fills with the pattern (device memory in the order
  /// of `native`, a cudaStream_t). `symmetric_offset`: the memory is in torch's symmetric memory,
  /// at this place in the rank's symmetric windows: pool "torch_symmetric" with that offset, so
  /// the layout check compares it across ranks. Returns its buffer id.
  uint32_t track_memory(std::string name, std::byte* data, uint64_t bytes, bool device,
                        void* native = nullptr, int64_t written_by = -1,
                        std::optional<uint64_t> symmetric_offset = std::nullopt);
  /// The library freed tracked buffer `buffer` (a free in the allocation log, on `stream`).
  void untrack_memory(uint32_t buffer, int stream);
  /// Bytes of a tracked buffer an op touches.
  struct Touch {
    uint32_t buffer = 0;
    ByteSpan span;
  };
  /// What library_op tells its caller.
  struct LibraryOp {
    uint64_t seq = 0;  ///< the op's place in the op log
    /// The replay asks the host to wait for the device once the op is issued: call
    /// synchronize_library() right after issuing it.
    bool sync_after = false;
  };
  /// An op of the case's library (a torch op) about to be issued: in the op log as a `kind` op
  /// (kernel | copy | host | collective...) on `stream`, the library's stream as its caller numbers
  /// them (0: the library's default stream; -1: the host thread itself), with the bytes of tracked
  /// buffers it reads and writes. A replay's delay for it is enqueued first on `native` (the
  /// cudaStream_t it will run on, nullptr the legacy stream; nothing for host ops, without a
  /// device, or for nullopt: a stream the caller models with no native one behind it).
  /// `moves`: the op only moves its reads' bytes to its writes (OpRecord::moves). `touches`:
  /// bytes it is handed without knowing how it uses them (OpRecord::touches), which a probe
  /// replay probes unless `probe` is false (an op of a graph launch: the graph runs after all
  /// its ops were logged, so the next one's log is not after this one ran).
  LibraryOp library_op(std::string kind, std::string name, int stream, std::optional<void*> native,
                       const std::vector<Touch>& reads, const std::vector<Touch>& writes,
                       bool moves = false, const std::vector<Touch>& touches = {},
                       bool probe = true);
  /// A kernel launched past the library's dispatcher (seen by CUPTI: Triton's, an extension's, a
  /// raw launch), about to run on `stream`: a `kernel` op named `name` whose accesses are
  /// inferred from its parameters (launch_params.h) over the tensors tracked and not freed
  /// (kept by address as they are: LiveMemory), as accesses of unknown direction. Memory the case
  /// got from alloc, torch's symmetric windows and untracked memory are not looked up.
  LibraryOp library_launch(std::string name, int stream, std::optional<void*> native,
                           const std::vector<KernelParam>& layout,
                           std::span<const std::byte> values);
  /// A copy or memset issued past the library's dispatcher (cudaMemcpyAsync, cudaMemsetAsync, the
  /// driver's cuMemcpy*Async; seen by CUPTI) about to run on `stream`: a `copy` op named `name`
  /// that writes [dst, dst + bytes) and, unless `is_set`, only moves the bytes it reads from
  /// [src, src + bytes): exact accesses to the tracked tensors those ranges fall in. nullopt,
  /// and nothing logged, when neither range falls in any (torch.tensor's copy of its data before
  /// its tensor is tracked; memory cprr does not know): work outside the op log.
  std::optional<LibraryOp> library_copy(std::string name, int stream, std::optional<void*> native,
                                        uint64_t dst, uint64_t src, uint64_t bytes, bool is_set);
  /// A CUDA graph capture of the case's library begins on `stream` (torch's
  /// CUDAGraph.capture_begin, on its current stream): until it ends, the ops of that stream
  /// (and of streams forked into the capture) are the graph's, not work that runs now. Each is
  /// logged as a `captured` op that touches nothing, and gets no replay's delay or sync.
  /// (library_graphs.h says what is and is not modelled.)
  void begin_graph_capture(int stream);
  /// The capture on `stream` ends: returns the graph's number in the case.
  uint32_t end_graph_capture(int stream);
  /// Graph `graph` is about to be launched on `stream` (`native` as library_op's): its ops are
  /// logged again on `stream`, in capture order, each with the accesses it was captured with and
  /// a replay's delays enqueued before the launch. Returns the last one (sync_after: the caller
  /// synchronizes once the graph is launched), or nullopt when the graph has no op.
  std::optional<LibraryOp> launch_graph(uint32_t graph, int stream, std::optional<void*> native);
  /// An ordering op of the case's library: `record` (event `event` captures `stream`'s position),
  /// `wait` (`stream` waits for the event's last record; stream -1: the host does) or `sync` (the
  /// host waits for `stream`; -1: for every stream). Events are numbered by the caller.
  void library_order(std::string kind, std::string name, int stream, int64_t event = -1);
  /// The host waits for all the device's work, the library's streams included (what a replay's
  /// sync_after and one_stream ask for after a library op).
  void synchronize_library();
  /// A probe replay's probe of the op just logged (Perturbation::probe_touches) lasts until
  /// release_probe, whatever is logged meanwhile: a declared call (cprr.accesses) whose block
  /// runs dispatcher ops of its own before its work is done. No-ops outside a probe replay.
  void hold_probe();
  void release_probe();
  /// The rank's memory for the case's library (cprr as its allocator: library_memory.h), made
  /// and opened for this case on first call; later cases open it as they start.
  LibraryMemory& library_memory();
  /// The rank is unfit for a next case (`why`: what happened): a call of the case's library
  /// into the world's transport raised (the transport may hold what one side left or be
  /// closed), or the case left its library's state behind (torch's RPC still initialized). The
  /// world is replaced after this case rather than given the next one. The first reason of a
  /// case is kept.
  void distrust_transport(std::string why);
  /// Work of the case's library the op log could not see, counted (e.g. "3 outside the op log:
  /// 3 allocation no op the dispatcher saw made"): an "unseen" op, which every report names so
  /// a clean verdict does not claim it was checked.
  void library_unseen(std::string what);

 private:
  /// The tracked tensors not freed, by address: made from the allocation log at the case's first
  /// launch or copy, then kept by track_memory and untrack_memory.
  LiveMemory& live_memory();
  /// The case's CUDA graphs (made at the first capture).
  LibraryGraphs& graphs();
  /// Whether an op on `stream` belongs to an open graph capture.
  bool captured(int stream) const;

  Context& ctx_;
};

}  // namespace cprr

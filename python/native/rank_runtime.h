#pragma once
// The rank side of cprr as the Python package sees it: plain C++ types only, so the pybind11
// module (bindings.cpp) needs no header of cprr's own dependencies and can be compiled on its own
// against another Python (the GPU machine's) and linked with this library built here.
//
// A Python rank process registers its cases here, then serve()s: the same worker loop, control
// protocol, watchdog, flight record, backend, placement and capture hashing as cpworker. Nothing
// of the wire format or the hash is written twice.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "python/native/unseen_work.h"
#include "runtime/transport.h"

namespace cprr {
class Context;
}

namespace cprr::python {

/// An allocation from one of the rank's arenas (Context::alloc).
struct Allocation {
  uint32_t id = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;
  bool device = false;  ///< device memory (cuda backend, not the host pool)
};

/// The running case's Context, for the Python Context. Valid only during the body's call.
class CaseContext {
 public:
  explicit CaseContext(Context& ctx) : ctx_(ctx) {}

  int rank() const;
  int world_size() const;
  uint64_t seed() const;
  /// The controller's id for this execution: the same on every rank, increasing.
  uint64_t execution() const;
  const std::string& case_name() const;
  std::map<std::string, std::string> params() const;
  /// The GPU this rank runs on (its index among the visible ones); -1 on the cpu backend.
  int device_index() const;
  /// "cpu" | "cuda".
  std::string backend() const;
  /// How the world's collectives travel: NCCL (a GPU per rank, so the case's own NCCL process
  /// group can too), Gloo staged through host memory (cuda, ranks sharing a GPU) or Gloo (cpu).
  CollectiveTransport transport() const;

  /// Hashes `bytes` at `address` as an output or probe (LibraryHooks::capture_memory). `dtype` is a
  /// cprr dtype name (u8, i8, i16, i32, i64, f16, bf16, f32, f64); `native_stream` a
  /// cudaStream_t (0: the legacy stream) for device memory; `host`: host memory (a CPU tensor),
  /// hashed on the host whatever the backend.
  void capture(bool is_output, const std::string& name, uint64_t address, uint64_t bytes,
               const std::string& dtype, std::vector<int64_t> shape, uint64_t native_stream,
               bool host);
  /// LibraryHooks::enter_collective; `op` is sum | max | min; `stream` an op-log stream
  /// (library_op); `group` 0 the world, else note_group's id; `members` its ranks as a bitmask.
  /// An uneven all-to-all gives its bytes to and from each group rank and its row size.
  uint64_t enter_collective(const std::string& kind, const std::string& dtype, uint64_t bytes,
                            int root, const std::string& op, int stream, uint32_t group,
                            uint64_t members, const std::string& where,
                            std::vector<uint64_t> send_bytes, std::vector<uint64_t> recv_bytes,
                            uint64_t row_bytes);
  void complete_collective(uint64_t handle);
  /// LibraryHooks::collective_raised.
  void collective_raised(uint64_t handle);
  /// LibraryHooks::enter_p2p: `kind` send | recv, `peer` a rank of the world.
  uint64_t enter_p2p(const std::string& kind, int peer, const std::string& dtype, uint64_t bytes,
                     uint32_t group, uint64_t members, const std::string& where);
  /// LibraryHooks::note_group.
  void note_group(uint32_t id, std::vector<int32_t> ranks, const std::string& backend,
                  const std::string& name);

  /// Bytes an op touches: (buffer id from track, offset in it, length).
  using Touch = std::tuple<uint32_t, uint64_t, uint64_t>;
  /// A native_stream value that is no cudaStream_t (0 is the legacy stream).
  static constexpr uint64_t kNoNativeStream = ~uint64_t{0};
  /// LibraryHooks::track_memory: a tensor of the case; `written_by` the op (seq) that made and
  /// wrote it, -1 for an unwritten one (torch.empty). `symmetric_offset` >= 0: the tensor is in
  /// torch's symmetric memory at that place in the rank's windows (pool "torch_symmetric").
  uint32_t track(const std::string& name, uint64_t address, uint64_t bytes, bool device,
                 uint64_t native_stream, int64_t written_by, int64_t symmetric_offset = -1);
  /// LibraryHooks::untrack_memory: the tensor's memory went back to its allocator.
  void untrack(uint32_t buffer, int stream);
  /// LibraryHooks::library_op: a torch op about to be issued on op-log stream `stream` (-1: the
  /// host), which runs on `native_stream` (kNoNativeStream: a stream the caller models, with none
  /// behind it); `moves`: it only moves its reads' bytes to its writes (OpRecord::moves);
  /// `touches`: bytes it is handed without knowing how it uses them (cprr.accesses' `uses`).
  /// Returns (its seq, whether to synchronize_library() after it).
  std::pair<uint64_t, bool> library_op(const std::string& kind, const std::string& name, int stream,
                                       uint64_t native_stream, const std::vector<Touch>& reads,
                                       const std::vector<Touch>& writes, bool moves,
                                       const std::vector<Touch>& touches = {});
  /// LibraryHooks::library_launch: a kernel seen only as a launch on op-log stream `stream`
  /// (native as library_op's), its parameters' layout as (offset, size) and their bytes.
  std::pair<uint64_t, bool> library_launch(const std::string& name, int stream,
                                           uint64_t native_stream,
                                           const std::vector<std::pair<uint64_t, uint64_t>>& layout,
                                           const std::vector<std::byte>& values);
  /// LibraryHooks::library_copy: a copy (or, `is_set`, a memset) seen only as its API call;
  /// nullopt: not logged (it touches no tracked memory).
  std::optional<std::pair<uint64_t, bool>> library_copy(const std::string& name, int stream,
                                                        uint64_t native_stream, uint64_t dst,
                                                        uint64_t src, uint64_t bytes, bool is_set);
  /// LibraryHooks::begin_graph_capture / end_graph_capture (returns the graph's number).
  void graph_begin(int stream);
  uint32_t graph_end(int stream);
  /// LibraryHooks::launch_graph: (the last op's seq, whether to synchronize_library() once the
  /// graph is launched); nullopt: the graph has no op.
  std::optional<std::pair<uint64_t, bool>> graph_launch(uint32_t graph, int stream,
                                                        uint64_t native_stream);
  /// LibraryHooks::library_order: record | wait | sync.
  void library_order(const std::string& kind, const std::string& name, int stream, int64_t event);
  /// LibraryHooks::synchronize_library.
  void synchronize_library();
  /// LibraryHooks::hold_probe, release_probe (a declared block's probe lasts the block).
  void hold_probe();
  void release_probe();
  /// LibraryHooks::distrust_transport.
  void distrust_transport(const std::string& why);
  /// LibraryHooks::library_unseen.
  void note_unseen(const std::string& what);

  /// Addresses of torch's memory that went back to cprr's arena since the last call (cprr as
  /// torch's allocator, torch_allocator.h): the frees for the allocation log.
  std::vector<uint64_t> torch_released();
  /// torch's record_stream on memory cprr's arena gave torch: `native_stream` uses it.
  void torch_record_stream(uint64_t address, uint64_t native_stream);

  /// `pool`: device | symmetric | host.
  Allocation alloc(const std::string& name, uint64_t bytes, const std::string& pool);
  void free(uint32_t id);

 private:
  Context& ctx_;
  std::map<uint32_t, Allocation> live_;
};

/// CaseContext's calls the C++ op capture (python/native/capture, the `_cprr_torch` module)
/// makes, as plain function pointers: that module reaches them through `_cprr` at run time
/// rather than linking this library, so loading it (with torch's libraries, which carry their
/// own Gloo) never changes where this library's own symbols resolve.
struct CaptureCalls {
  uint32_t (*track)(CaseContext&, const std::string& name, uint64_t address, uint64_t bytes,
                    bool device, uint64_t native_stream, int64_t written_by,
                    int64_t symmetric_offset);
  void (*untrack)(CaseContext&, uint32_t buffer, int stream);
  std::pair<uint64_t, bool> (*library_op)(CaseContext&, const std::string& kind,
                                          const std::string& name, int stream,
                                          uint64_t native_stream,
                                          const std::vector<CaseContext::Touch>& reads,
                                          const std::vector<CaseContext::Touch>& writes,
                                          bool moves);
  void (*library_order)(CaseContext&, const std::string& kind, const std::string& name, int stream,
                        int64_t event);
  void (*synchronize_library)(CaseContext&);
  std::vector<uint64_t> (*torch_released)(CaseContext&);
  void (*torch_record_stream)(CaseContext&, uint64_t address, uint64_t native_stream);
  /// unseen_work.h's enter_seen, leave_seen, forgive_pending.
  void (*enter_seen)();
  void (*leave_seen)();
  void (*forgive_pending)();
  std::pair<uint64_t, bool> (*library_launch)(
      CaseContext&, const std::string& name, int stream, uint64_t native_stream,
      const std::vector<std::pair<uint64_t, uint64_t>>& layout,
      const std::vector<std::byte>& values);
  std::optional<std::pair<uint64_t, bool>> (*library_copy)(CaseContext&, const std::string& name,
                                                           int stream, uint64_t native_stream,
                                                           uint64_t dst, uint64_t src,
                                                           uint64_t bytes, bool is_set);
  /// unseen_work.h's set_launch_hook.
  void (*set_launch_hook)(const LaunchHooks& hooks, void* user);
};
const CaptureCalls& capture_calls();

/// A case body: returns "" when it passed, else what failed (a Python traceback). A C++ exception
/// it lets through fails the case the same way.
using Body = std::function<std::string(CaseContext&)>;

/// (add_case, registering a case with its options, is in case_registration.h.)
/// Set-up for every case of a world, run once the world joined its communicator and before its
/// first case (a standby world's while earlier cases run): gets how the world's collectives
/// travel and the rank's GPU (-1: none); returns the start-up phase it names ("" for none);
/// throwing fails the world's start (recorder/api/case.h, ConnectedHook).
using Connected = std::function<std::string(CollectiveTransport transport, int device_index)>;
void add_connected_hook(Connected hook);
/// A problem found while loading cases (an import that failed): the worker reports it and exits
/// before serving, as it does for a C++ registration error.
void add_error(std::string message);
/// A file the cases were loaded from (the catalog names it; cprecord records its content hash).
void add_source_file(std::string path);
/// The registered cases' names.
std::vector<std::string> case_names();
/// Runs the worker (recorder/rank/worker.h) with these arguments (argv[0] first); returns its
/// exit status.
int serve(const std::vector<std::string>& argv);
/// kProtocolVersion, for a message when versions disagree.
uint32_t protocol_version();
/// kDefaultMasterPort (recorder/launch/port_claim.h): torchrun's MASTER_PORT where no claim gave
/// one. One number for both languages: the Python side reads it here.
int default_master_port();

}  // namespace cprr::python

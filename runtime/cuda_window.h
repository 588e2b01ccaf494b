#pragma once
// The CUDA backend's one-sided window: every rank's symmetric arena, and the semaphore table
// kept right after its pool, as pointers this rank's streams can write, plus the kernels of the
// one-sided ops (signal, wait_signal, delay). Peers are reached through NCCL's own mapping of a
// registered symmetric window (NCCL maps every rank of its load/store team into each process;
// the device API's ncclGetPeerPointer names where) or, for a plain cudaMalloc arena, through
// CUDA IPC. Built once per rank process while connecting; every pointer stays valid for the
// world's life.
//
// runtime/ may not use kernels/, so the few kernels the backend needs live here and nvcc
// compiles this file (runtime/CMakeLists.txt).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cprr {

/// Bytes after the symmetric pool that hold the semaphore table (kMaxSemaphores * world_size
/// slots of 8 bytes): 2 MiB keeps the arena a whole number of the 2 MiB pages ncclMemAlloc and
/// window registration work in, and fits the table of any world up to 4096 ranks.
inline constexpr uint64_t kSemaphoreTableReserve = uint64_t{2} << 20;

/// Sends `bytes` bytes from every rank and returns everyone's, rank r's at r * bytes. Collective:
/// every rank calls it at the same point.
using AllGatherBytes = std::function<std::vector<std::byte>(const void* mine, std::size_t bytes)>;

/// A peer's cudaMalloc allocation opened through CUDA IPC; closed when destroyed.
class IpcMapping {
 public:
  /// Opens `handle` (peer access enabled on demand); throws cprr::Error naming `peer`.
  IpcMapping(const cudaIpcMemHandle_t& handle, int peer);
  ~IpcMapping();
  IpcMapping(IpcMapping&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)) {}
  IpcMapping& operator=(IpcMapping&& o) noexcept;
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  std::byte* data() const { return ptr_; }

 private:
  std::byte* ptr_ = nullptr;
};

class CudaWindow {
 public:
  /// A window that cannot reach the peers: every one-sided op fails with `why`.
  explicit CudaWindow(std::string why) : problem_(std::move(why)) {}
  /// Rank p's arena is at bases[p] in this process; `mappings` keeps the IPC-opened ones open.
  /// The semaphore table of each arena starts `pool_bytes` after its base.
  CudaWindow(std::vector<std::byte*> bases, uint64_t pool_bytes, std::vector<IpcMapping> mappings);

  /// Empty when put/signal/wait_signal work; otherwise why not.
  const std::string& problem() const { return problem_; }
  /// Byte `offset` of `peer`'s symmetric pool, for a put of `bytes`; checks both (cprr::Error).
  std::byte* pool_at(int peer, uint64_t offset, std::size_t bytes) const;
  /// Slot `slot` of `peer`'s semaphore table; checks both (cprr::Error).
  uint64_t* slot_at(int peer, uint32_t slot) const;

 private:
  void check_usable(const char* what) const;

  std::string problem_;
  std::vector<std::byte*> bases_;
  uint64_t pool_bytes_ = 0;
  std::vector<IpcMapping> mappings_;  // the IPC-opened entries of bases_
};

/// Every rank's arena as this process maps it through the NCCL symmetric window `win` (the
/// device API's ncclGetPeerPointer, read by a one-thread kernel on `stream`). Needs every rank
/// in NCCL's load/store team; not collective.
std::vector<std::byte*> nccl_peer_bases(ncclWindow_t win, int world_size, cudaStream_t stream);

/// The window over every rank's cudaMalloc arena `base` on this rank's GPU `device`, opened
/// through CUDA IPC: ranks on one GPU (sharing it) map each other directly, ranks on two GPUs
/// need peer access between them. Collective: it all-gathers the handles even when this rank
/// cannot export or reach a peer, so no rank is left waiting; such a failure comes back as the
/// window's problem.
CudaWindow ipc_window(int rank, int world_size, int device, std::byte* base, uint64_t pool_bytes,
                      const AllGatherBytes& all_gather);

/// In stream order, once everything before it on `stream` is visible system-wide: a one-thread
/// kernel stores `value` to `slot` (any rank's table).
void launch_signal(uint64_t* slot, uint64_t value, cudaStream_t stream);
/// In stream order: a one-thread kernel spins until `slot` (this rank's table) holds >= `value`.
void launch_wait_signal(const uint64_t* slot, uint64_t value, cudaStream_t stream);
/// In stream order: a one-thread kernel idles `nanoseconds` (device global timer).
void launch_delay(uint64_t nanoseconds, cudaStream_t stream);

}  // namespace cprr

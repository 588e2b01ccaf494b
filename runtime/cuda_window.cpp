// Compiled by nvcc (see runtime/CMakeLists.txt): the window's kernels live beside its setup.
#include "runtime/cuda_window.h"

#include <nccl_device.h>

#include <cstring>

#include "runtime/backend.h"
#include "runtime/cuda_check.h"

namespace cprr {
namespace {

// How long a waiting kernel sleeps between polls of its slot: short next to a put over NVLink,
// long enough that one spinning thread does not crowd the SM it shares with the case's kernels.
constexpr unsigned kPollSleepNs = 200;
constexpr unsigned kDelaySleepNs = 1000;

__global__ void signal_kernel(uint64_t* slot, uint64_t value) {
  // Stream order finished every earlier op of the stream (a put's copy included) before this
  // kernel started; the fence makes all of it visible system-wide before the peer sees the value.
  __threadfence_system();
  *static_cast<volatile uint64_t*>(slot) = value;
}

__global__ void wait_signal_kernel(const uint64_t* slot, uint64_t value) {
  const volatile uint64_t* s = slot;
  while (*s < value) __nanosleep(kPollSleepNs);
  // Orders the ops after this kernel (in stream order) after the signal that released it.
  __threadfence_system();
}

__device__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void delay_kernel(uint64_t nanoseconds) {
  const uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) __nanosleep(kDelaySleepNs);
}

__global__ void peer_bases_kernel(ncclWindow_t win, int world_size, void** out) {
  for (int p = 0; p < world_size; ++p) out[p] = ncclGetPeerPointer(win, 0, p);
}

/// Device memory for a connect-time exchange; freed on every path.
class DeviceScratch {
 public:
  explicit DeviceScratch(std::size_t bytes) { CPRR_CUDA(cudaMalloc(&ptr_, bytes)); }
  ~DeviceScratch() { cudaFree(ptr_); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

/// What a rank tells the others about its arena in ipc_window.
struct IpcRecord {
  cudaIpcMemHandle_t handle;
  uint32_t ok;     // 0: this rank cannot export its arena
  int32_t device;  // the rank's GPU
};

/// A CUDA call that may fail without making the backend unusable: the error is cleared (it is not
/// sticky) so that a later launch check does not report it, and returned as text.
std::string soft_failure(const char* call, cudaError_t e) {
  cudaGetLastError();
  return fmt::format("{}: {}: {}", call, cudaGetErrorName(e), cudaGetErrorString(e));
}

/// Why this rank's GPU `mine` cannot write a peer's GPU `theirs`, or empty (one GPU: nothing
/// to cross).
std::string peer_access_problem(int mine, int theirs) {
  if (mine == theirs) return {};
  int can = 0;
  if (const cudaError_t e = cudaDeviceCanAccessPeer(&can, mine, theirs); e != cudaSuccess) {
    return soft_failure("cudaDeviceCanAccessPeer", e);
  }
  if (can == 0)
    return fmt::format("GPU {} has no peer access to GPU {} (no P2P path)", mine, theirs);
  return {};
}

}  // namespace

IpcMapping::IpcMapping(const cudaIpcMemHandle_t& handle, int peer) {
  void* p = nullptr;
  if (const cudaError_t e = cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess);
      e != cudaSuccess) {
    CPRR_THROW("rank {}'s symmetric pool: {}", peer, soft_failure("cudaIpcOpenMemHandle", e));
  }
  ptr_ = static_cast<std::byte*>(p);
}

IpcMapping::~IpcMapping() {
  if (ptr_ != nullptr) cudaIpcCloseMemHandle(ptr_);
}

IpcMapping& IpcMapping::operator=(IpcMapping&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  return *this;
}

CudaWindow::CudaWindow(std::vector<std::byte*> bases, uint64_t pool_bytes,
                       std::vector<IpcMapping> mappings)
    : bases_(std::move(bases)), pool_bytes_(pool_bytes), mappings_(std::move(mappings)) {
  CPRR_CHECK(uint64_t{kMaxSemaphores} * bases_.size() * sizeof(uint64_t) <= kSemaphoreTableReserve,
             "a world of {} ranks needs a semaphore table larger than the {} bytes reserved",
             bases_.size(), kSemaphoreTableReserve);
}

void CudaWindow::check_usable(const char* what) const {
  if (!problem_.empty()) CPRR_THROW("{}: no one-sided window in this world: {}", what, problem_);
}

std::byte* CudaWindow::pool_at(int peer, uint64_t offset, std::size_t bytes) const {
  check_usable("put");
  CPRR_CHECK(peer >= 0 && peer < static_cast<int>(bases_.size()),
             "put: no rank {} in a world of {}", peer, bases_.size());
  CPRR_CHECK(offset <= pool_bytes_ && bytes <= pool_bytes_ - offset,
             "put of {} bytes at byte {} of rank {}'s symmetric pool runs past its end ({} bytes)",
             bytes, offset, peer, pool_bytes_);
  return bases_[peer] + offset;
}

uint64_t* CudaWindow::slot_at(int peer, uint32_t slot) const {
  check_usable("signal/wait_signal");
  const auto world = static_cast<uint32_t>(bases_.size());
  CPRR_CHECK(peer >= 0 && static_cast<uint32_t>(peer) < world,
             "signal/wait_signal: no rank {} in a world of {}", peer, world);
  CPRR_CHECK(slot < kMaxSemaphores * world,
             "semaphore slot {} is outside the table of {} slots (kMaxSemaphores * world size)",
             slot, kMaxSemaphores * world);
  return reinterpret_cast<uint64_t*>(bases_[peer] + pool_bytes_) + slot;
}

std::vector<std::byte*> nccl_peer_bases(ncclWindow_t win, int world_size, cudaStream_t stream) {
  CPRR_CHECK(win != nullptr, "no NCCL window to read peers' addresses from");
  const std::size_t bytes = sizeof(void*) * static_cast<std::size_t>(world_size);
  DeviceScratch out(bytes);
  peer_bases_kernel<<<1, 1, 0, stream>>>(win, world_size, static_cast<void**>(out.get()));
  CPRR_CUDA(cudaGetLastError());
  std::vector<std::byte*> bases(world_size);
  CPRR_CUDA(cudaMemcpyAsync(bases.data(), out.get(), bytes, cudaMemcpyDeviceToHost, stream));
  CPRR_CUDA(cudaStreamSynchronize(stream));
  return bases;
}

CudaWindow ipc_window(int rank, int world_size, int device, std::byte* base, uint64_t pool_bytes,
                      const AllGatherBytes& all_gather) {
  // Local failures travel in the record rather than as exceptions: every rank must reach the
  // all-gather, or the others would pair it with whatever collective this rank runs next.
  IpcRecord mine{};
  std::string why;
  if (const cudaError_t e = cudaIpcGetMemHandle(&mine.handle, base); e != cudaSuccess) {
    why = soft_failure("cudaIpcGetMemHandle", e);
  }
  mine.ok = why.empty() ? 1 : 0;
  mine.device = device;
  const std::vector<std::byte> all = all_gather(&mine, sizeof mine);
  CPRR_CHECK(all.size() == sizeof(IpcRecord) * static_cast<std::size_t>(world_size),
             "all-gather of IPC handles returned {} bytes for {} ranks", all.size(), world_size);
  if (!why.empty()) return CudaWindow(why);

  std::vector<std::byte*> bases(world_size);
  std::vector<IpcMapping> mappings;
  try {
    for (int p = 0; p < world_size; ++p) {
      if (p == rank) {
        bases[p] = base;
        continue;
      }
      IpcRecord theirs;
      std::memcpy(&theirs, all.data() + sizeof theirs * p, sizeof theirs);
      if (theirs.ok == 0) {
        return CudaWindow(fmt::format(
            "rank {} cannot share its symmetric pool through CUDA IPC (its stderr says why)", p));
      }
      if (std::string cannot = peer_access_problem(device, theirs.device); !cannot.empty()) {
        return CudaWindow(fmt::format("rank {}'s pool is out of reach: {}", p, cannot));
      }
      mappings.emplace_back(theirs.handle, p);
      bases[p] = mappings.back().data();
    }
  } catch (const Error& e) {
    return CudaWindow(e.what());
  }
  return CudaWindow(std::move(bases), pool_bytes, std::move(mappings));
}

void launch_signal(uint64_t* slot, uint64_t value, cudaStream_t stream) {
  signal_kernel<<<1, 1, 0, stream>>>(slot, value);
  CPRR_CUDA(cudaGetLastError());
}

void launch_wait_signal(const uint64_t* slot, uint64_t value, cudaStream_t stream) {
  wait_signal_kernel<<<1, 1, 0, stream>>>(slot, value);
  CPRR_CUDA(cudaGetLastError());
}

void launch_delay(uint64_t nanoseconds, cudaStream_t stream) {
  if (nanoseconds == 0) return;
  delay_kernel<<<1, 1, 0, stream>>>(nanoseconds);
  CPRR_CUDA(cudaGetLastError());
}

}  // namespace cprr

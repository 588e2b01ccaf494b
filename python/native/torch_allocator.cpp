#include "python/native/torch_allocator.h"

#include <atomic>
#include <cstdio>

#include "recorder/api/library_memory.h"
#if CPRR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cprr::python {
namespace {

std::atomic<bool> g_used{false};  // set once, by the worker, before any case
std::atomic<bool> g_told{false};  // the arena-full note was printed
std::atomic<uint64_t> g_allocated{0};
std::atomic<uint64_t> g_peak{0};

void count_allocated(uint64_t bytes) {
  const uint64_t now = g_allocated.fetch_add(bytes) + bytes;
  uint64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

#if CPRR_HAVE_CUDA
// Makes `device` current for a call, as torch's own guards do, and restores the thread's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) {
      cudaSetDevice(device);
    } else {
      previous_ = -1;
    }
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Whether work on `stream` is being captured into a CUDA graph. Asking about the legacy stream
// while another stream captures in global mode is itself an error: that is a capture too.
bool capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    cudaGetLastError();  // torch's next launch check must not find it
    return true;
  }
  return status == cudaStreamCaptureStatusActive;
}
#endif

}  // namespace

void use_torch_allocator() { g_used = true; }
bool torch_allocator_used() { return g_used; }

TorchMemory torch_memory() { return TorchMemory{g_allocated.load(), g_peak.load()}; }

void reset_torch_peak() { g_peak = g_allocated.load(); }

}  // namespace cprr::python

using cprr::LibraryMemory;

namespace {

void* allocate(std::size_t bytes, int device, void* stream) {
  LibraryMemory* memory = LibraryMemory::serving();
  if (memory != nullptr) {
#if CPRR_HAVE_CUDA
    // Asked only while the case has a capture open: allocations are torch's hot path.
    const bool graph = memory->capture_open() && cprr::python::capturing(stream);
#else
    const bool graph = false;
#endif
    if (std::byte* p = memory->allocate(bytes, stream, graph)) return p;
    if (memory->full() && !cprr::python::g_told.exchange(true)) {
      std::fprintf(stderr,
                   "cprr: the device arena is full: tensors past it come from cudaMalloc, "
                   "outside the case's placement policy (CPRR_CUDA_DEVICE_MIB sets its size)\n");
    }
  }
#if CPRR_HAVE_CUDA
  // Outside cases (the process group's buffers, a module's tensors made at import) torch's
  // memory is the driver's, as it would be anyway.
  const cprr::python::DeviceGuard guard(device);
  void* p = nullptr;
  if (cudaMalloc(&p, bytes == 0 ? 1 : bytes) != cudaSuccess) {
    cudaGetLastError();  // torch reports the failed allocation; the error must not linger
    return nullptr;
  }
  return p;
#else
  (void)bytes;
  (void)device;
  (void)stream;
  return nullptr;
#endif
}

}  // namespace

void* cprr_torch_alloc(std::size_t bytes, int device, void* stream) {
  void* p = allocate(bytes, device, stream);
  if (p != nullptr) cprr::python::count_allocated(bytes);
  return p;
}

void cprr_torch_free(void* p, std::size_t bytes, int device, void* stream) {
  (void)stream;
  if (p == nullptr) return;
  cprr::python::g_allocated.fetch_sub(bytes);  // torch passes back the size it asked for
  LibraryMemory* memory = LibraryMemory::serving();
  if (memory != nullptr && memory->release(static_cast<std::byte*>(p))) return;
#if CPRR_HAVE_CUDA
  const cprr::python::DeviceGuard guard(device);
  // Memory of an arena already gone (a tensor freed as the process exits) is not the driver's
  // to free: the error is dropped with it.
  if (cudaFree(p) != cudaSuccess) cudaGetLastError();
#else
  (void)device;
#endif
}

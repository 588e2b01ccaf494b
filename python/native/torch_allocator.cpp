#include "python/native/torch_allocator.h"

#include <atomic>
#include <cstdio>

#include "recorder/api/library_memory.h"
#if CPRR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cprr::python {
namespace {

std::atomic<bool> g_used{false};     // set once, by the worker, before any case
std::atomic<bool> g_told{false};     // the arena-full note was printed

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
#endif

}  // namespace

void use_torch_allocator() { g_used = true; }
bool torch_allocator_used() { return g_used; }

}  // namespace cprr::python

using cprr::LibraryMemory;

void* cprr_torch_alloc(std::size_t bytes, int device, void* stream) {
  LibraryMemory* memory = LibraryMemory::serving();
  if (memory != nullptr) {
    if (std::byte* p = memory->allocate(bytes, stream)) return p;
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

void cprr_torch_free(void* p, std::size_t bytes, int device, void* stream) {
  (void)bytes;
  (void)stream;
  if (p == nullptr) return;
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

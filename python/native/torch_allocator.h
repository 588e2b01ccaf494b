#pragma once
// cprr as PyTorch's CUDA allocator: torch.cuda.memory.CUDAPluggableAllocator loads these two C
// functions from libcprr_pyrank.so and torch.cuda.memory.change_current_allocator makes them
// torch's (cprr/worker.py, before torch first touches CUDA). While a case runs they serve from
// the rank's device arena (recorder/api/library_memory.h); outside cases, and when the arena is
// full, from cudaMalloc.
#include <cstddef>
#include <cstdint>

extern "C" {
/// torch's alloc_fn: `bytes` on device `device` for work on `stream` (a cudaStream_t).
void* cprr_torch_alloc(std::size_t bytes, int device, void* stream);
/// torch's free_fn: `p` as returned above (torch passes its size, device and stream back).
void cprr_torch_free(void* p, std::size_t bytes, int device, void* stream);
}

namespace cprr::python {

/// The worker made the functions above torch's allocator: every case serves them from its
/// rank's arena from now on (CaseContext).
void use_torch_allocator();
bool torch_allocator_used();

/// Bytes torch holds through the functions above (arena and cudaMalloc alike) now and at most
/// since the last reset: torch.cuda.memory_allocated and max_memory_allocated, which torch's
/// pluggable allocator cannot answer itself.
struct TorchMemory {
  uint64_t allocated = 0;
  uint64_t peak = 0;
};
TorchMemory torch_memory();
/// The peak starts again from what is allocated now (torch.cuda.reset_peak_memory_stats).
void reset_torch_peak();

}  // namespace cprr::python

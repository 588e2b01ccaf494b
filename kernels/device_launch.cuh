#pragma once
// The definition behind device_launch.h, for .cu files only. Instantiate it per functor type:
//   CPRR_DEVICE_KERNEL(my_ns::MyFunctor);
#include <cuda_runtime_api.h>

#include <algorithm>

#include "kernels/device_launch.h"

namespace cprr::kernels {

/// Throws cprr::Error naming the failed launch (kept out of line: nvcc never sees fmt).
void throw_launch_error(cudaError_t err, const char* what);

/// A grid-stride loop over [0, n): any n fits in a bounded grid.
template <class F>
__global__ void grid_kernel(F f, uint64_t n) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    f(i);
  }
}

template <class F>
void device_launch(const F& f, uint64_t n, void* stream) {
  if (n == 0) return;
  constexpr unsigned kThreads = 256;
  const uint64_t blocks = std::min<uint64_t>((n + kThreads - 1) / kThreads, uint64_t{1} << 16);
  grid_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(f,
                                                                                                 n);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw_launch_error(err, __PRETTY_FUNCTION__);
}

}  // namespace cprr::kernels

/// Explicitly instantiates the device launch of one functor type (in a .cu file).
#define CPRR_DEVICE_KERNEL(...) \
  template void cprr::kernels::device_launch<__VA_ARGS__>(const __VA_ARGS__&, uint64_t, void*)

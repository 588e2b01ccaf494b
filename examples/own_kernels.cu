// The device side of own_kernels.h, built by nvcc only when cprr has the CUDA backend
// (CMakeLists.txt): a kernel written by hand and the device build of a single-source functor.
#include <cprr/device_kernel.cuh>
#include <stdexcept>
#include <string>

#include "own_kernels.h"

namespace example {
namespace {

__global__ void square(const float* in, float* out, uint64_t n, long long spin_cycles) {
  // Busy-waits first, so the kernel is slow enough for an unordered reader to overtake it.
  const long long start = clock64();
  while (clock64() - start < spin_cycles) {
  }
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = in[i] * in[i];
  }
}

}  // namespace

void square_on_device(const float* in, float* out, uint64_t n, long long spin_cycles,
                      void* stream) {
  const unsigned blocks = static_cast<unsigned>(n < 256 * 1024 ? (n + 255) / 256 : 1024);
  square<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(in, out, n, spin_cycles);
  // A failed launch is an error of this call, not of some later one.
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) {
    throw std::runtime_error(std::string("square<<<>>>: ") + cudaGetErrorString(err));
  }
}

}  // namespace example

CPRR_DEVICE_KERNEL(example::ScaleAdd);

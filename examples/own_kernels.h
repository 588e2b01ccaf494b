#pragma once
// Device code of your own, seen from the host side (own_kernels.cpp compiles it with the host
// compiler; own_kernels.cu builds the device side with nvcc when cprr has the CUDA backend).
#include <cprr/kernels.h>

#include <cstdint>

namespace example {

/// y[i] = a * x[i] + y[i]: a single-source functor. ctx.launch runs it per index on the CPU
/// backend and, with the device build below, as a grid on cuda.
struct ScaleAdd {
  const float* x;
  float* y;
  float a;
  CPRR_HD void operator()(uint64_t i) const { y[i] = a * x[i] + y[i]; }
};

/// Enqueues a hand-written CUDA kernel (own_kernels.cu) on `stream`, a cudaStream_t: out[i] =
/// in[i] squared for i < n, after each thread busy-waits `spin_cycles` GPU clocks (a slow kernel,
/// so a reader that does not wait for it really reads stale bytes). Throws std::runtime_error
/// when the launch fails.
void square_on_device(const float* in, float* out, uint64_t n, long long spin_cycles, void* stream);

}  // namespace example

#if CPRR_HAVE_CUDA
// ScaleAdd has a device build: CPRR_DEVICE_KERNEL(example::ScaleAdd) in own_kernels.cu.
template <>
inline constexpr bool cprr::kernels::kDeviceKernel<example::ScaleAdd> = true;
#endif

#pragma once
// Launching a CPRR_HD functor as a CUDA grid from plain C++ (case files are compiled by the host
// compiler, not nvcc). A functor type opts in twice: kDeviceKernel<F> = true in its header, so
// Context::launch knows at compile time that a device build exists, and an explicit instantiation
// of device_launch<F> in a .cu file (CPRR_DEVICE_KERNEL, see device_launch.cuh). A functor without
// the first (say a test's host lambda) fails on the cuda backend with a message naming the kernel;
// one without the second fails the link.
#include <cstdint>

namespace cprr::kernels {

/// True for functor types that have a device build (specialize it next to the functor).
template <class F>
inline constexpr bool kDeviceKernel = false;

/// Launches f(i) for every i in [0, n) as a grid on `stream` (a cudaStream_t); throws cprr::Error
/// when the launch fails. Defined in device_launch.cuh.
template <class F>
void device_launch(const F& f, uint64_t n, void* stream);

}  // namespace cprr::kernels

// Out-of-line pieces of device_launch.cuh, compiled by the host compiler (nvcc never sees fmt).
#include <cuda_runtime_api.h>

#include "kernels/device_launch.h"
#include "runtime/error.h"

namespace cprr::kernels {

void throw_launch_error(cudaError_t err, const char* what) {
  CPRR_THROW("kernel launch {}: {}: {}", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

}  // namespace cprr::kernels

#pragma once
// Checks for CUDA runtime and NCCL calls, following the one error rule (runtime/error.h): a failure
// throws cprr::Error carrying file, line, the failing call's text and the library's own message.
// Included only by CUDA-enabled host code (files named cuda_*.cpp). Not for .cu files: nvcc
// rejects fmt's compile-time format strings, so .cu code reports errors through an out-of-line
// function compiled by the host compiler (see kernels/device_launch.cuh).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "runtime/error.h"

/// Runs a CUDA runtime call; throws cprr::Error "<file>:<line>: <call>: <cudaGetErrorName>:
/// <text>".
#define CPRR_CUDA(call)                                                                            \
  do {                                                                                             \
    cudaError_t cprr_err_ = (call);                                                                \
    if (cprr_err_ != cudaSuccess)                                                                  \
      CPRR_THROW("{}: {}: {}", #call, cudaGetErrorName(cprr_err_), cudaGetErrorString(cprr_err_)); \
  } while (0)

/// Runs an NCCL call; ncclInProgress (non-blocking communicators) is not an error here, the caller
/// waits for it. Throws cprr::Error with the call and ncclGetErrorString/ncclGetLastError.
#define CPRR_NCCL(call)                                                                           \
  do {                                                                                            \
    ncclResult_t cprr_res_ = (call);                                                              \
    if (cprr_res_ != ncclSuccess && cprr_res_ != ncclInProgress)                                  \
      CPRR_THROW("{}: {} ({})", #call, ncclGetErrorString(cprr_res_), ncclGetLastError(nullptr)); \
  } while (0)

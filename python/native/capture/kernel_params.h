#pragma once
// A launch's parameters as bytes and layout, for the launch's inferred accesses
// (recorder/api/launch_params.h): CUPTI hands over the launch's handle (unseen_work.h's
// SeenLaunch) and either a pointer to each parameter's value or cuLaunchKernel's `extra` (one
// packed buffer); the layout comes from CUDA's parameter queries (CUDA 12.4), looked up in the
// loaded driver and runtime at first use, so nothing links either.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "python/native/kernel_name.h"
#include "python/native/unseen_work.h"

namespace cprr::python::capture {

struct KernelArgs {
  std::vector<std::pair<uint64_t, uint64_t>> layout;  ///< (offset, size) of each parameter
  std::vector<std::byte> values;                      ///< the parameter buffer they describe
};

/// Reads the signature's parameters one by one (`param_info(i)`: (offset, size), nullopt past the
/// last) and lays out their values from `launch`; nullopt when neither kernelParams nor a packed
/// buffer is given, or kernelParams is given without a layout. At most kMaxParams parameters.
using ParamInfo = std::optional<std::pair<uint64_t, uint64_t>> (*)(const void* handle,
                                                                   size_t index);
std::optional<KernelArgs> kernel_args(const SeenLaunch& launch, ParamInfo param_info);

/// The ParamInfo for a driver handle of `kind`: cuFuncGetParamInfo or cuKernelGetParamInfo;
/// nullptr for a host stub or when the loaded driver lacks it.
ParamInfo cuda_param_info(SeenLaunch::Handle kind);
/// `launch` with a driver handle: a host stub becomes its CUkernel through the loaded runtime
/// (cudaGetKernel), which leaves no error of its own behind; nullopt when it cannot.
std::optional<SeenLaunch> with_driver_handle(const SeenLaunch& launch);
/// A driver query for a parameter's offset and size (cuFuncGetParamInfo, cuKernelGetParamInfo):
/// a CUresult.
using GetParamInfo = int (*)(const void* handle, size_t index, size_t* offset, size_t* size);
/// cuda.h's CUDA_ERROR_INVALID_HANDLE.
inline constexpr int kInvalidHandle = 400;
/// `own` (the query for a handle of `kind`) for parameter `index` of `handle`. The runtime
/// launches a kernel through cuLaunchKernel with its CUkernel in place of a CUfunction (the
/// driver takes either there), which cuFuncGetParamInfo refuses as no handle of its kind: such a
/// handle is asked `as_kernel` (cuKernelGetParamInfo; nullptr: not asked).
int param_query(GetParamInfo own, GetParamInfo as_kernel, SeenLaunch::Handle kind,
                const void* handle, size_t index, size_t* offset, size_t* size);
/// What the driver answers to the query for `launch`'s first parameter (a CUresult; -1: the loaded
/// driver has no query for its handle kind), for CPRR_LAUNCH_DEBUG's reason.
int first_param_status(const SeenLaunch& launch);

inline constexpr size_t kMaxParams = 256;

using python::kernel_name;  ///< a kernel's name for the op log (python/native/kernel_name.h)

}  // namespace cprr::python::capture

#pragma once
// A launch's parameters as bytes and layout, for the launch's inferred accesses
// (recorder/api/launch_params.h): CUPTI hands over the CUfunction and either kernelParams (a
// pointer to each parameter's value) or cuLaunchKernel's `extra` (one packed buffer); the layout
// comes from the driver's cuFuncGetParamInfo (CUDA 12.4), looked up in the loaded libcuda at
// first use, so nothing links the driver.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "python/native/unseen_work.h"

namespace cprr::python::capture {

struct KernelArgs {
  std::vector<std::pair<uint64_t, uint64_t>> layout;  ///< (offset, size) of each parameter
  std::vector<std::byte> values;                      ///< the parameter buffer they describe
};

/// Reads the signature's parameters one by one (`param_info(i)`: (offset, size), nullopt past the
/// last) and lays out their values from `launch`; nullopt when neither kernelParams nor a packed
/// buffer is given, or kernelParams is given without a layout. At most kMaxParams parameters.
using ParamInfo = std::optional<std::pair<uint64_t, uint64_t>> (*)(void* function, size_t index);
std::optional<KernelArgs> kernel_args(const SeenLaunch& launch, ParamInfo param_info);

/// The driver's cuFuncGetParamInfo as a ParamInfo; nullptr when the loaded driver lacks it.
ParamInfo driver_param_info();

inline constexpr size_t kMaxParams = 256;

/// A kernel's name for the op log: CUPTI's symbol, demangled when it is a C++ name.
std::string kernel_name(const char* symbol);

}  // namespace cprr::python::capture

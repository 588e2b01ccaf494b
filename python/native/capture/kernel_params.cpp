#include "python/native/capture/kernel_params.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace cprr::python::capture {
namespace {

// cuLaunchKernel's `extra` markers (cuda.h's CU_LAUNCH_PARAM_*), as the driver defines them.
const void* const kParamEnd = nullptr;
const void* const kBufferPointer = reinterpret_cast<void*>(0x01);
const void* const kBufferSize = reinterpret_cast<void*>(0x02);

// The packed buffer `extra` names, if it names one.
std::optional<std::pair<const std::byte*, size_t>> packed_buffer(void** extra) {
  const std::byte* data = nullptr;
  const size_t* size = nullptr;
  for (size_t i = 0; extra[i] != kParamEnd && i < 2 * kMaxParams; i += 2) {
    if (extra[i] == kBufferPointer) data = static_cast<const std::byte*>(extra[i + 1]);
    if (extra[i] == kBufferSize) size = static_cast<const size_t*>(extra[i + 1]);
  }
  if (data == nullptr || size == nullptr) return std::nullopt;
  return std::pair{data, *size};
}

using GetParamInfo = int (*)(void* function, size_t index, size_t* offset, size_t* size);

// The loaded driver's cuFuncGetParamInfo, looked up once; nullptr: none.
GetParamInfo get_param_info() {
  static const GetParamInfo get = [] {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return driver ? reinterpret_cast<GetParamInfo>(dlsym(driver, "cuFuncGetParamInfo")) : nullptr;
  }();
  return get;
}

std::optional<std::pair<uint64_t, uint64_t>> from_driver(void* function, size_t index) {
  size_t offset = 0, size = 0;
  if (get_param_info()(function, index, &offset, &size) != 0) return std::nullopt;
  return std::pair<uint64_t, uint64_t>{offset, size};
}

}  // namespace

ParamInfo driver_param_info() { return get_param_info() ? &from_driver : nullptr; }

std::optional<KernelArgs> kernel_args(const SeenLaunch& launch, ParamInfo param_info) {
  KernelArgs args;
  if (param_info != nullptr) {
    for (size_t i = 0; i < kMaxParams; ++i) {
      const auto p = param_info(launch.function, i);
      if (!p) break;
      args.layout.push_back(*p);
    }
  }
  if (launch.params == nullptr) {
    const auto packed = launch.extra ? packed_buffer(launch.extra) : std::nullopt;
    if (!packed) return std::nullopt;
    args.values.assign(packed->first, packed->first + packed->second);
    // Without a layout the whole buffer is one parameter: each aligned word of it is looked up.
    if (args.layout.empty()) args.layout.emplace_back(0, packed->second);
    const auto outside = [&](const std::pair<uint64_t, uint64_t>& p) {
      return p.first > packed->second || p.second > packed->second - p.first;
    };
    args.layout.erase(std::remove_if(args.layout.begin(), args.layout.end(), outside),
                      args.layout.end());
    return args;
  }
  if (args.layout.empty()) return std::nullopt;  // the values' sizes are unknown
  uint64_t end = 0;
  for (const auto& [offset, size] : args.layout) end = std::max(end, offset + size);
  args.values.assign(end, std::byte{0});
  for (size_t i = 0; i < args.layout.size(); ++i) {
    const auto [offset, size] = args.layout[i];
    if (launch.params[i] != nullptr)
      std::memcpy(args.values.data() + offset, launch.params[i], size);
  }
  return args;
}

std::string kernel_name(const char* symbol) {
  if (symbol == nullptr || *symbol == '\0') return "kernel";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(symbol, nullptr, nullptr, &status), &std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : std::string(symbol);
}

}  // namespace cprr::python::capture

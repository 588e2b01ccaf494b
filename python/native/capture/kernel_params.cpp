#include "python/native/capture/kernel_params.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
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

// `name` in the first of `libraries` that is loaded already (RTLD_NOLOAD: the copy the process
// uses, never another), or nullptr.
template <typename F>
F loaded(std::initializer_list<const char*> libraries, const char* name) {
  for (const char* library : libraries) {
    if (void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD)) {
      if (void* f = dlsym(handle, name)) return reinterpret_cast<F>(f);
    }
  }
  return nullptr;
}

// Each handle kind's query in the loaded driver, looked up once: cuFuncGetParamInfo for a
// CUfunction, cuKernelGetParamInfo for a CUkernel (CUDA 12.4). Never the runtime's
// cudaFuncGetParamInfo: the query past the last parameter fails by design, and a runtime call
// that fails leaves its error for the launching code's cudaGetLastError() to find.
GetParamInfo query(SeenLaunch::Handle kind) {
  static const auto function = loaded<GetParamInfo>({"libcuda.so.1"}, "cuFuncGetParamInfo");
  static const auto kernel = loaded<GetParamInfo>({"libcuda.so.1"}, "cuKernelGetParamInfo");
  switch (kind) {
    case SeenLaunch::Handle::function:
      return function;
    case SeenLaunch::Handle::kernel:
      return kernel;
    case SeenLaunch::Handle::host_stub:
      return nullptr;
  }
  return nullptr;
}

// The loaded runtime's calls that turn a host stub into its CUkernel (cudaGetKernel, CUDA 12.0)
// without leaving an error behind.
struct StubCalls {
  using Peek = int (*)();
  using GetKernel = int (*)(void** kernel, const void* stub);
  Peek peek = nullptr;   ///< cudaPeekAtLastError
  Peek clear = nullptr;  ///< cudaGetLastError
  GetKernel get_kernel = nullptr;
};

const StubCalls& stub_calls() {
  static const StubCalls calls = [] {
    const std::initializer_list<const char*> runtimes = {"libcudart.so.13", "libcudart.so.12"};
    return StubCalls{loaded<StubCalls::Peek>(runtimes, "cudaPeekAtLastError"),
                     loaded<StubCalls::Peek>(runtimes, "cudaGetLastError"),
                     loaded<StubCalls::GetKernel>(runtimes, "cudaGetKernel")};
  }();
  return calls;
}

int ask(SeenLaunch::Handle kind, const void* handle, size_t index, size_t* offset, size_t* size) {
  return param_query(query(kind), query(SeenLaunch::Handle::kernel), kind, handle, index, offset,
                     size);
}

template <SeenLaunch::Handle Kind>
std::optional<std::pair<uint64_t, uint64_t>> from_cuda(const void* handle, size_t index) {
  size_t offset = 0, size = 0;
  if (ask(Kind, handle, index, &offset, &size) != 0) return std::nullopt;
  return std::pair<uint64_t, uint64_t>{offset, size};
}

}  // namespace

ParamInfo cuda_param_info(SeenLaunch::Handle kind) {
  if (query(kind) == nullptr) return nullptr;
  switch (kind) {
    case SeenLaunch::Handle::function:
      return &from_cuda<SeenLaunch::Handle::function>;
    case SeenLaunch::Handle::kernel:
      return &from_cuda<SeenLaunch::Handle::kernel>;
    case SeenLaunch::Handle::host_stub:
      return nullptr;
  }
  return nullptr;
}

int param_query(GetParamInfo own, GetParamInfo as_kernel, SeenLaunch::Handle kind,
                const void* handle, size_t index, size_t* offset, size_t* size) {
  const int status = own(handle, index, offset, size);
  if (status != kInvalidHandle || kind != SeenLaunch::Handle::function || as_kernel == nullptr)
    return status;
  return as_kernel(handle, index, offset, size);
}

int first_param_status(const SeenLaunch& launch) {
  if (query(launch.kind) == nullptr) return -1;
  size_t offset = 0, size = 0;
  return ask(launch.kind, launch.handle, 0, &offset, &size);
}

std::optional<SeenLaunch> with_driver_handle(const SeenLaunch& launch) {
  if (launch.kind != SeenLaunch::Handle::host_stub) return launch;
  const StubCalls& rt = stub_calls();
  // The runtime that registered the stub is the loaded one when the launching library links it
  // dynamically (torch, its extensions); a stub it does not know fails, and that error, like one
  // already pending (which a failure here could not be told from), stays the caller's.
  if (!rt.peek || !rt.clear || !rt.get_kernel || rt.peek() != 0) return std::nullopt;
  void* kernel = nullptr;
  if (rt.get_kernel(&kernel, launch.handle) != 0 || kernel == nullptr) {
    rt.clear();  // the error was this lookup's: there was none before it
    return std::nullopt;
  }
  SeenLaunch l = launch;
  l.kind = SeenLaunch::Handle::kernel;
  l.handle = kernel;
  return l;
}

std::optional<KernelArgs> kernel_args(const SeenLaunch& launch, ParamInfo param_info) {
  KernelArgs args;
  if (param_info != nullptr) {
    for (size_t i = 0; i < kMaxParams; ++i) {
      const auto p = param_info(launch.handle, i);
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

}  // namespace cprr::python::capture

// Which of the driver's parameter queries answer for a kernel launched through the runtime
// (without one, a `<<<>>>` launch stays outside the op log, its layout unreadable). Prints, for a
// kernel of three parameters, what each way of naming it gives: cudaGetKernel's cudaKernel_t
// cast to a CUkernel (cuKernelGetParamInfo), that CUkernel's CUfunction in the current context
// (cuKernelGetFunction + cuFuncGetParamInfo), cudaGetFuncBySymbol's CUfunction, each call found
// both by the linker and as cprr finds it (dlsym in the loaded libcuda.so.1).
//
//   nvcc -arch=sm_90 -o probe tools/device/probe_param_info.cu -lcuda && ./probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>

__global__ void three(float* out, int n, double scale) {
  if (threadIdx.x < n) out[threadIdx.x] = static_cast<float>(scale);
}

using Query = CUresult (*)(void*, size_t, size_t*, size_t*);

void layout(const char* how, Query q, void* handle) {
  std::printf("%-44s", how);
  for (size_t i = 0; i < 4; ++i) {
    size_t offset = 0, size = 0;
    const CUresult r = q(handle, i, &offset, &size);
    if (r == CUDA_SUCCESS) {
      std::printf(" [%zu: %zu+%zu]", i, offset, size);
    } else {
      const char* name = nullptr;
      cuGetErrorName(r, &name);
      std::printf(" [%zu: %s]", i, name ? name : "?");
    }
  }
  std::printf("\n");
}

int main() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("driver %d runtime %d\n", driver, runtime);
  float* out = nullptr;
  cudaMalloc(&out, 64);
  three<<<1, 1>>>(out, 1, 2.0);
  std::printf("launch: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));

  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  const auto kernel_q = reinterpret_cast<Query>(dlsym(lib, "cuKernelGetParamInfo"));
  const auto func_q = reinterpret_cast<Query>(dlsym(lib, "cuFuncGetParamInfo"));
  std::printf("dlsym: cuKernelGetParamInfo %p cuFuncGetParamInfo %p\n",
              reinterpret_cast<void*>(kernel_q), reinterpret_cast<void*>(func_q));

  cudaKernel_t k = nullptr;
  std::printf("cudaGetKernel: %s %p\n",
              cudaGetErrorName(cudaGetKernel(&k, reinterpret_cast<const void*>(three))),
              static_cast<void*>(k));
  layout("cuKernelGetParamInfo(cudaGetKernel)", reinterpret_cast<Query>(&cuKernelGetParamInfo),
         k);
  if (kernel_q) layout("  the same, dlsym'd", kernel_q, k);

  CUfunction from_kernel = nullptr;
  const CUresult r = cuKernelGetFunction(&from_kernel, reinterpret_cast<CUkernel>(k));
  std::printf("cuKernelGetFunction: %d\n", static_cast<int>(r));
  if (r == CUDA_SUCCESS) {
    layout("cuFuncGetParamInfo(cuKernelGetFunction)", reinterpret_cast<Query>(&cuFuncGetParamInfo),
           from_kernel);
  }

  cudaFunction_t f = nullptr;
  std::printf("cudaGetFuncBySymbol: %s\n",
              cudaGetErrorName(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(three))));
  layout("cuFuncGetParamInfo(cudaGetFuncBySymbol)", reinterpret_cast<Query>(&cuFuncGetParamInfo),
         f);
  if (func_q) layout("  the same, dlsym'd", func_q, f);
  std::printf("pending runtime error after the probes: %s\n",
              cudaGetErrorName(cudaPeekAtLastError()));
  return 0;
}

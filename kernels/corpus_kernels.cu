// Device builds of the corpus functors (kernels/corpus_kernels.h): the same source the CPU
// backend runs per index, launched as grids on the cuda backend.
#include <cstdint>

#include "kernels/corpus_kernels.h"
#include "kernels/device_launch.cuh"

#define CPRR_FILL_KERNELS(T)                        \
  CPRR_DEVICE_KERNEL(cprr::kernels::FillRandom<T>); \
  CPRR_DEVICE_KERNEL(cprr::kernels::FillIota<T>);   \
  CPRR_DEVICE_KERNEL(cprr::kernels::FillConst<T>)

CPRR_FILL_KERNELS(uint8_t);
CPRR_FILL_KERNELS(int32_t);
CPRR_FILL_KERNELS(int64_t);
CPRR_FILL_KERNELS(float);
CPRR_FILL_KERNELS(double);
CPRR_DEVICE_KERNEL(cprr::kernels::Axpy);
CPRR_DEVICE_KERNEL(cprr::kernels::AttendStep);
CPRR_DEVICE_KERNEL(cprr::kernels::CombineStep);

// The stream-race corpus (corpus/stream_races.cpp).
CPRR_DEVICE_KERNEL(cprr::kernels::CopyElems<uint8_t>);
CPRR_DEVICE_KERNEL(cprr::kernels::CopyElems<int32_t>);
CPRR_DEVICE_KERNEL(cprr::kernels::CopyElems<int64_t>);
CPRR_DEVICE_KERNEL(cprr::kernels::CopyElems<float>);
CPRR_DEVICE_KERNEL(cprr::kernels::CopyElems<double>);
CPRR_DEVICE_KERNEL(cprr::kernels::CpForwardStep);
CPRR_DEVICE_KERNEL(cprr::kernels::MaximumInto);
CPRR_DEVICE_KERNEL(cprr::kernels::PackByDispls);
CPRR_DEVICE_KERNEL(cprr::kernels::UnpackByDispls);

#pragma once
// Single-source kernels: functors marked CPRR_HD compile as __host__ __device__ under nvcc and as
// plain C++ otherwise, so one corpus kernel runs on both backends unchanged.
#if defined(__CUDACC__)
#define CPRR_HD __host__ __device__
#else
#define CPRR_HD
#endif

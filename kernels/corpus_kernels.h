#pragma once
// The corpus's kernels, written once as CPRR_HD functors: the CPU backend calls them per index on
// a stream thread, the CUDA backend launches the same functor as a grid. Only exact arithmetic
// (integer ops, float add/mul/fmax) so both backends agree bit for bit.
#include <cstdint>

#include "kernels/device_launch.h"
#include "kernels/hd.h"
#include "kernels/rng.h"

namespace cprr::kernels {

/// out[i] = a deterministic pseudo-random value of (seed, i): floats in [-1, 1), ints in [0, 1000).
template <class T>
struct FillRandom {
  T* out;
  uint64_t seed;
  CPRR_HD void operator()(uint64_t i) const {
    if constexpr (T(0.5) != T(0)) {
      out[i] = static_cast<T>(random_unit_float(seed, i));
    } else {
      out[i] = static_cast<T>(random_at(seed, i) % 1000);
    }
  }
};

/// out[i] = base + i: values that identify their producer and position.
template <class T>
struct FillIota {
  T* out;
  T base;
  CPRR_HD void operator()(uint64_t i) const { out[i] = base + static_cast<T>(i); }
};

/// out[i] = value.
template <class T>
struct FillConst {
  T* out;
  T value;
  CPRR_HD void operator()(uint64_t i) const { out[i] = value; }
};

/// out[i] = a * x[i] + y[i].
struct Axpy {
  float* out;
  const float* x;
  const float* y;
  float a;
  CPRR_HD void operator()(uint64_t i) const { out[i] = a * x[i] + y[i]; }
};

/// One step of a context-parallel attention block, reduced to exact arithmetic:
/// partial[i] = q[i] * kv[i] + 0.5 * kv[(i + 1) % n]   (the "scores" of this step's KV block).
struct AttendStep {
  float* partial;
  const float* q;
  const float* kv;
  uint64_t n;
  CPRR_HD void operator()(uint64_t i) const { partial[i] = q[i] * kv[i] + 0.5f * kv[(i + 1) % n]; }
};

/// Folds a step into the running result: acc += partial, running max (the max_logit_per_step of
/// seed 001) = fmax(running max, partial).
struct CombineStep {
  float* acc;
  float* max_logit;
  const float* partial;
  CPRR_HD void operator()(uint64_t i) const {
    acc[i] += partial[i];
    max_logit[i] = max_logit[i] > partial[i] ? max_logit[i] : partial[i];
  }
};

// Every functor above has a device build (kernels/corpus_kernels.cu instantiates the fills for
// u8, i32, i64, f32 and f64).
template <class T>
inline constexpr bool kDeviceKernel<FillRandom<T>> = true;
template <class T>
inline constexpr bool kDeviceKernel<FillIota<T>> = true;
template <class T>
inline constexpr bool kDeviceKernel<FillConst<T>> = true;
template <>
inline constexpr bool kDeviceKernel<Axpy> = true;
template <>
inline constexpr bool kDeviceKernel<AttendStep> = true;
template <>
inline constexpr bool kDeviceKernel<CombineStep> = true;

}  // namespace cprr::kernels

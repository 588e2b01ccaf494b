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

// ---- the stream-race corpus (corpus/stream_races.cpp) ----

/// out[i] = in[i]: a kernel that moves data (reading a one-sided window into an output, say).
template <class T>
struct CopyElems {
  T* out;
  const T* in;
  CPRR_HD void operator()(uint64_t i) const { out[i] = in[i]; }
};

/// One step of seed 001's all-gather context-parallel forward, reduced to exact arithmetic:
/// score = q[i] * kv[i] + 0.5 * kv[(i + 1) % n]; this step's slice of max_logit_per_step gets the
/// score and its slice of out gets score * kv[i].
struct CpForwardStep {
  float* out;
  float* max_logit;
  const float* q;
  const float* kv;
  uint64_t n;
  CPRR_HD void operator()(uint64_t i) const {
    const float score = q[i] * kv[i] + 0.5f * kv[(i + 1) % n];
    out[i] = score * kv[i];
    max_logit[i] = score;
  }
};

/// acc[i] = max(acc[i], x[i]) (torch.maximum(max_logit, max_logit_per_step[i - 1]) of seed 001).
struct MaximumInto {
  float* acc;
  const float* x;
  CPRR_HD void operator()(uint64_t i) const { acc[i] = acc[i] > x[i] ? acc[i] : x[i]; }
};

/// The send side of an all-to-all-v driven by device-side counts and displacements (seed 003):
/// out[i] = in[p * stride + (i - displs[p])] for the first peer p whose [displs[p], displs[p] +
/// counts[p]) holds i, or -1 where none does. Every index is bounds-checked, so arrays that a race
/// corrupted give wrong values, never an out-of-bounds access.
struct PackByDispls {
  int32_t* out;
  const int32_t* in;  ///< world chunks of `stride` elements, chunk p for peer p
  const int64_t* counts;
  const int64_t* displs;
  int64_t world;
  int64_t stride;
  CPRR_HD void operator()(uint64_t i) const {
    const auto at = static_cast<int64_t>(i);
    int32_t v = -1;
    for (int64_t p = 0; p < world; ++p) {
      const int64_t j = at - displs[p];
      if (j >= 0 && j < counts[p] && j < stride) {
        v = in[p * stride + j];
        break;
      }
    }
    out[i] = v;
  }
};

/// The receive side: spreads a packed all-to-all-v result back into one chunk of `stride`
/// elements per source peer: out[p * stride + j] = in[displs[p] + j] for j < counts[p], else -1.
/// Bounds-checked as PackByDispls (`in_count` is the packed buffer's length).
struct UnpackByDispls {
  int32_t* out;
  const int32_t* in;
  const int64_t* counts;
  const int64_t* displs;
  int64_t in_count;
  int64_t stride;
  CPRR_HD void operator()(uint64_t i) const {
    const auto p = static_cast<int64_t>(i) / stride;
    const auto j = static_cast<int64_t>(i) % stride;
    const int64_t from = displs[p] + j;
    out[i] = j < counts[p] && from >= 0 && from < in_count ? in[from] : -1;
  }
};

// Device builds (kernels/corpus_kernels.cu instantiates CopyElems for u8, i32, i64, f32 and f64).
template <class T>
inline constexpr bool kDeviceKernel<CopyElems<T>> = true;
template <>
inline constexpr bool kDeviceKernel<CpForwardStep> = true;
template <>
inline constexpr bool kDeviceKernel<MaximumInto> = true;
template <>
inline constexpr bool kDeviceKernel<PackByDispls> = true;
template <>
inline constexpr bool kDeviceKernel<UnpackByDispls> = true;

}  // namespace cprr::kernels

#pragma once
// The key of a tensor's memory in the capture's tables: its storage's device and address
// (python/cprr/capture/tensor_table.py's key_of).
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace cprr::python::capture {

struct TensorKey {
  int8_t type = 0;    ///< c10::DeviceType
  int8_t index = -1;  ///< the device's index (-1: the host)
  uint64_t base = 0;  ///< the storage's first byte
  bool operator==(const TensorKey& o) const {
    return type == o.type && index == o.index && base == o.base;
  }
};

struct TensorKeyHash {
  size_t operator()(const TensorKey& k) const {
    return std::hash<uint64_t>()(k.base ^ (uint64_t(uint8_t(k.type)) << 56) ^
                                 (uint64_t(uint8_t(k.index)) << 48));
  }
};

inline TensorKey key_of(const at::Tensor& t) {
  const uint64_t data = reinterpret_cast<uint64_t>(t.data_ptr());
  return {static_cast<int8_t>(t.device().type()), static_cast<int8_t>(t.device().index()),
          data - static_cast<uint64_t>(t.storage_offset() * t.element_size())};
}

/// Bytes from the tensor's first element to past its last, as laid out in its storage.
inline uint64_t extent(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * std::abs(t.stride(d));
  return static_cast<uint64_t>((last + 1) * t.element_size());
}

inline uint64_t storage_bytes(const at::Tensor& t) { return t.storage().nbytes(); }

/// A view with more contiguous runs than this is logged as its whole extent
/// (python/cprr/capture/tensor_table.py's MAX_RUNS).
constexpr int64_t kMaxRuns = 64;

/// (byte offset in its storage, bytes) of each contiguous run of the tensor's elements, in
/// address order, runs that touch or overlap merged; its whole extent past kMaxRuns runs
/// (python/cprr/capture/tensor_table.py's runs, which says why).
inline std::vector<std::pair<uint64_t, uint64_t>> runs(const at::Tensor& t) {
  const int64_t item = t.element_size();
  const int64_t start = t.storage_offset();
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size), innermost first
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1 && t.stride(d) != 0) dims.emplace_back(std::abs(t.stride(d)), t.size(d));
  }
  std::sort(dims.begin(), dims.end());
  int64_t run = 1;
  size_t i = 0;
  for (; i < dims.size() && dims[i].first == run; ++i) run *= dims[i].second;
  int64_t count = 1;
  for (size_t k = i; k < dims.size(); ++k) count *= dims[k].second;
  if (count > kMaxRuns) {
    return {{static_cast<uint64_t>(start * item), extent(t)}};
  }
  std::vector<int64_t> starts{0};
  for (size_t k = i; k < dims.size(); ++k) {
    std::vector<int64_t> next;
    for (int64_t s : starts) {
      for (int64_t n = 0; n < dims[k].second; ++n) next.push_back(s + n * dims[k].first);
    }
    starts = std::move(next);
  }
  std::sort(starts.begin(), starts.end());
  std::vector<std::pair<int64_t, int64_t>> merged;  // [begin, end) in elements
  for (int64_t s : starts) {
    if (!merged.empty() && s <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, s + run);
    } else {
      merged.emplace_back(s, s + run);
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& [a, b] : merged) {
    out.emplace_back(static_cast<uint64_t>((start + a) * item),
                     static_cast<uint64_t>((b - a) * item));
  }
  return out;
}

/// A tensor the capture tracks: with elements, on the host or a CUDA device.
inline bool trackable(const at::Tensor& t) {
  // A sparse (or other non-strided) tensor has no storage of its own: its indices and values
  // are the dense tensors the ops that made it read.
  return t.defined() && t.numel() > 0 && t.layout() == c10::kStrided && t.has_storage() &&
         (t.device().is_cpu() || t.is_cuda());
}

}  // namespace cprr::python::capture

#pragma once
// The key of a tensor's memory in the capture's tables: its storage's device and address
// (python/cprr/_tensor_table.py's key_of).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

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

/// A tensor the capture tracks: with elements, on the host or a CUDA device.
inline bool trackable(const at::Tensor& t) {
  return t.numel() > 0 && (t.device().is_cpu() || t.is_cuda());
}

}  // namespace cprr::python::capture

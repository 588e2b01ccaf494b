#pragma once
// Buffer poisoning: fill memory with a recognisable 8-byte pattern so reads of bytes a case never
// wrote show up as that pattern in its output hash. The definition is position-based, byte i of a
// buffer gets byte (i % 8) of the little-endian pattern, so a slice poisoned on its own and the
// same bytes poisoned as part of a larger buffer at the same start agree, and the CPU backend
// (poison_host) and the CUDA one (launch_poison, kernels/device_hash.h) write identical bytes.
#include <cstddef>
#include <cstdint>

#include "kernels/hd.h"

namespace cprr::kernels {

/// Byte `index` of a buffer poisoned with `pattern`: byte (index % 8) of the little-endian pattern.
CPRR_HD constexpr uint8_t poison_byte(uint64_t pattern, std::size_t index) {
  return static_cast<uint8_t>(pattern >> (8 * (index % 8)));
}

/// Fills `bytes` bytes at `data` (host memory, any alignment) with the repeating pattern.
void poison_host(void* data, std::size_t bytes, uint64_t pattern);

}  // namespace cprr::kernels

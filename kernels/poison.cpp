#include "kernels/poison.h"

#include <bit>
#include <cstring>

namespace cprr::kernels {

void poison_host(void* data, std::size_t bytes, uint64_t pattern) {
  static_assert(std::endian::native == std::endian::little, "poison pattern assumes little endian");
  auto* p = static_cast<uint8_t*>(data);
  // Positions count from the buffer start, so every 8 bytes from there are the pattern itself;
  // memcpy stores them whatever the address's alignment.
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) std::memcpy(p + i, &pattern, 8);
  for (; i < bytes; ++i) p[i] = poison_byte(pattern, i);
}

}  // namespace cprr::kernels

#include "kernels/hash.h"

#include <xxhash.h>

#include <bit>
#include <cstring>

namespace cprr {

Digest hash_buffer(const void* data, std::size_t bytes) {
  static_assert(std::endian::native == std::endian::little, "hash definition assumes little endian");
  Digest d;
  const auto* p = static_cast<const unsigned char*>(data);
  const std::size_t k = hash_chunk_count(bytes);
  d.chunks.resize(k);
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t begin = i * kHashChunkBytes;
    const std::size_t len = std::min(kHashChunkBytes, bytes - begin);
    d.chunks[i] = XXH3_64bits_withSeed(p + begin, len, 0);
  }
  d.whole = k == 0 ? XXH3_64bits_withSeed(nullptr, 0, 0)
                   : XXH3_64bits_withSeed(d.chunks.data(), 8 * k, static_cast<XXH64_hash_t>(bytes));
  return d;
}

}  // namespace cprr

#include "kernels/hash.h"

// XXH3_generateSecret_fromSeed is declared in xxhash.h's static-linking section (it is exported
// by the shared library all the same).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <bit>

#include "runtime/error.h"

namespace cprr {

static_assert(std::endian::native == std::endian::little, "hash definition assumes little endian");

Digest hash_buffer(const void* data, std::size_t bytes) {
  Digest d;
  const auto* p = static_cast<const unsigned char*>(data);
  const std::size_t k = hash_chunk_count(bytes);
  d.chunks.resize(k);
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t begin = i * kHashChunkBytes;
    const std::size_t len = std::min(kHashChunkBytes, bytes - begin);
    d.chunks[i] = XXH3_64bits_withSeed(p + begin, len, 0);
  }
  d.whole = whole_hash_of_chunks(d.chunks.data(), k, bytes);
  return d;
}

uint64_t whole_hash_of_chunks(const uint64_t* chunks, std::size_t count, std::size_t bytes) {
  CPRR_CHECK(count == hash_chunk_count(bytes),
             "whole_hash_of_chunks: {} chunk hashes given for a {}-byte buffer, which has {}",
             count, bytes, hash_chunk_count(bytes));
  // The chunk hashes are hashed as their little-endian bytes, which is their memory layout here.
  if (count == 0) return XXH3_64bits_withSeed(nullptr, 0, 0);
  return XXH3_64bits_withSeed(chunks, 8 * count, static_cast<XXH64_hash_t>(bytes));
}

std::array<uint8_t, 192> xxh3_seed0_secret() {
  static_assert(XXH3_SECRET_DEFAULT_SIZE == 192);
  std::array<uint8_t, 192> secret{};
  XXH3_generateSecret_fromSeed(secret.data(), 0);
  return secret;
}

}  // namespace cprr

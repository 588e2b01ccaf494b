#pragma once
// The output hash definition. It is written down here so that a GPU kernel can reproduce it bit
// for bit (kernels/ will get a device twin) and so a mismatch names a byte range:
//
//   chunk size C = kHashChunkBytes (64 KiB). A buffer of n bytes has ceil(n / C) chunks;
//   chunk i covers bytes [i*C, min((i+1)*C, n)).
//   chunk_hash[i] = XXH3_64bits_withSeed(bytes of chunk i, its length, seed = 0)
//   whole         = XXH3_64bits_withSeed(chunk_hash[0..k) as little-endian uint64 array,
//                                        8*k bytes, seed = n)
//   A 0-byte buffer has no chunks and whole = XXH3_64bits_withSeed(empty, 0, seed = 0).
//
// Chunks are independent, so a device computes them in parallel and the whole hash is one more
// tiny XXH3 over the chunk hashes. Seeding the whole hash with n separates buffers whose chunk
// hashes agree but whose lengths differ.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cprr {

inline constexpr std::size_t kHashChunkBytes = 64 * 1024;

/// Whole and per-chunk hashes of one buffer.
struct Digest {
  uint64_t whole = 0;
  std::vector<uint64_t> chunks;
  bool operator==(const Digest&) const = default;
};

/// Hashes `bytes` bytes at `data` by the definition above (host reference implementation).
Digest hash_buffer(const void* data, std::size_t bytes);

/// Number of chunks a buffer of `bytes` bytes has.
constexpr std::size_t hash_chunk_count(std::size_t bytes) {
  return (bytes + kHashChunkBytes - 1) / kHashChunkBytes;
}

/// The whole hash of a `bytes`-byte buffer from its `count` chunk hashes (count must equal
/// hash_chunk_count(bytes)); the one home of that step, shared by hash_buffer and device hashing.
uint64_t whole_hash_of_chunks(const uint64_t* chunks, std::size_t count, std::size_t bytes);

/// XXH3's 192-byte secret for seed 0, obtained from libxxhash at run time so the device twin
/// (kernels/xxh3_hd.h) can hash without cprr carrying a copy of XXH3's built-in secret table.
std::array<uint8_t, 192> xxh3_seed0_secret();

}  // namespace cprr

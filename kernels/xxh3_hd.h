#pragma once
// XXH3-64 with seed 0, written once as CPRR_HD functions so the device chunk hasher
// (kernels/device_hash.cu) runs exactly the code that the host test compares against libxxhash
// (tests/kernels/xxh3_hd_test.cpp). It follows XXH3_64bits_internal of xxhash 0.8 and its scalar
// helpers. The 192-byte secret is a parameter: the seed-0 secret is XXH3's built-in one, which
// cprr does not copy into its sources; it is fetched from libxxhash at run time
// (cprr::xxh3_seed0_secret(), kernels/hash.h).
//
// The long-input path (> 240 bytes) is split into per-lane pieces. Per 64-byte stripe, XXH3 adds
// to accumulator lane j the keyed product of the stripe's word j and the raw word j^1; both are
// plain sums modulo 2^64, so the 16 stripes of a 1024-byte block may be summed in any grouping
// (LaneSums) before the block's nonlinear scramble. A warp splits a block's stripes that way;
// hash_long below is the sequential composition of the same pieces.
#include <cstddef>
#include <cstdint>

#include "kernels/hd.h"

// Unrolled on the device only (the host compiler of an nvcc build does not know the pragma).
#if defined(__CUDA_ARCH__)
#define CPRR_XXH3_UNROLL _Pragma("unroll")
#else
#define CPRR_XXH3_UNROLL
#endif

namespace cprr::kernels::xxh3 {

inline constexpr std::size_t kSecretBytes = 192;
inline constexpr std::size_t kStripeBytes = 64;
inline constexpr std::size_t kAccLanes = 8;
inline constexpr std::size_t kStripesPerBlock = (kSecretBytes - kStripeBytes) / 8;  // 16
inline constexpr std::size_t kBlockBytes = kStripeBytes * kStripesPerBlock;         // 1024
inline constexpr std::size_t kMidsizeMax = 240;
/// Secret offsets of the long path: scramble key, the last stripe's keys, the merge keys.
inline constexpr std::size_t kScrambleSecret = kSecretBytes - kStripeBytes;        // 128
inline constexpr std::size_t kLastStripeSecret = kSecretBytes - kStripeBytes - 7;  // 121
inline constexpr std::size_t kMergeSecret = 11;

inline constexpr uint64_t kPrime32_1 = 0x9E3779B1U;
inline constexpr uint64_t kPrime32_2 = 0x85EBCA77U;
inline constexpr uint64_t kPrime32_3 = 0xC2B2AE3DU;
inline constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ULL;
inline constexpr uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4FULL;
inline constexpr uint64_t kPrime64_3 = 0x165667B19E3779F9ULL;
inline constexpr uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ULL;
inline constexpr uint64_t kPrime64_5 = 0x27D4EB2F165667C5ULL;

/// Little-endian 32-bit load from any address: byte loads, since captured slices may be unaligned.
CPRR_HD inline uint32_t read_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

/// Little-endian 64-bit load from any address (host compilers fuse it into one load).
CPRR_HD inline uint64_t read_le64(const uint8_t* p) {
  return uint64_t{read_le32(p)} | uint64_t{read_le32(p + 4)} << 32;
}

/// Low and high 64 bits of a*b folded by xor; portable so host and device run the same code.
CPRR_HD inline uint64_t mul128_fold64(uint64_t a, uint64_t b) {
  const uint64_t lo_lo = (a & 0xFFFFFFFFu) * (b & 0xFFFFFFFFu);
  const uint64_t hi_lo = (a >> 32) * (b & 0xFFFFFFFFu);
  const uint64_t lo_hi = (a & 0xFFFFFFFFu) * (b >> 32);
  const uint64_t hi_hi = (a >> 32) * (b >> 32);
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;
  const uint64_t upper = (hi_lo >> 32) + (cross >> 32) + hi_hi;
  const uint64_t lower = (cross << 32) | (lo_lo & 0xFFFFFFFFu);
  return lower ^ upper;
}

/// 64-bit rotate left by 0 < r < 64 bits.
CPRR_HD inline uint64_t rotl64(uint64_t v, int r) { return (v << r) | (v >> (64 - r)); }

/// Byte reversal of a 64-bit word (XXH_swap64).
CPRR_HD inline uint64_t swap64(uint64_t v) {
  uint64_t r = 0;
  for (int i = 0; i < 8; ++i) r = (r << 8) | ((v >> (8 * i)) & 0xFFu);
  return r;
}

/// XXH3's fast final mix, for inputs whose bits are already partly mixed.
CPRR_HD inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ULL;
  return h ^ (h >> 32);
}

/// XXH64's final mix, which XXH3 reuses for inputs of 0 to 3 bytes.
CPRR_HD inline uint64_t xxh64_avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime64_2;
  h ^= h >> 29;
  h *= kPrime64_3;
  return h ^ (h >> 32);
}

/// The stronger mix used for 4 to 8 bytes, where the input is not yet mixed at all.
CPRR_HD inline uint64_t rrmxmx(uint64_t h, uint64_t len) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= 0x9FB21C651E98DF25ULL;
  h ^= (h >> 35) + len;
  h *= 0x9FB21C651E98DF25ULL;
  return h ^ (h >> 28);
}

/// Inputs of 0 to 16 bytes (seed 0, so the seed terms of the reference vanish).
CPRR_HD inline uint64_t hash_len_0to16(const uint8_t* in, std::size_t len, const uint8_t* secret) {
  if (len > 8) {
    const uint64_t lo = read_le64(in) ^ (read_le64(secret + 24) ^ read_le64(secret + 32));
    const uint64_t hi = read_le64(in + len - 8) ^ (read_le64(secret + 40) ^ read_le64(secret + 48));
    return avalanche(len + swap64(lo) + hi + mul128_fold64(lo, hi));
  }
  if (len >= 4) {
    const uint64_t input64 = read_le32(in + len - 4) + (uint64_t{read_le32(in)} << 32);
    return rrmxmx(input64 ^ (read_le64(secret + 8) ^ read_le64(secret + 16)), len);
  }
  if (len > 0) {
    const uint32_t combined = uint32_t{in[0]} << 16 | uint32_t{in[len >> 1]} << 24 |
                              uint32_t{in[len - 1]} | static_cast<uint32_t>(len) << 8;
    return xxh64_avalanche(combined ^ uint64_t{read_le32(secret) ^ read_le32(secret + 4)});
  }
  return xxh64_avalanche(read_le64(secret + 56) ^ read_le64(secret + 64));
}

/// One 16-byte keyed multiply of the 17-240 byte paths.
CPRR_HD inline uint64_t mix16(const uint8_t* in, const uint8_t* secret) {
  return mul128_fold64(read_le64(in) ^ read_le64(secret),
                       read_le64(in + 8) ^ read_le64(secret + 8));
}

/// Inputs of 17 to 128 bytes: pairs of 16-byte mixes from both ends toward the middle.
CPRR_HD inline uint64_t hash_len_17to128(const uint8_t* in, std::size_t len,
                                         const uint8_t* secret) {
  uint64_t acc = len * kPrime64_1;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        acc += mix16(in + 48, secret + 96);
        acc += mix16(in + len - 64, secret + 112);
      }
      acc += mix16(in + 32, secret + 64);
      acc += mix16(in + len - 48, secret + 80);
    }
    acc += mix16(in + 16, secret + 32);
    acc += mix16(in + len - 32, secret + 48);
  }
  acc += mix16(in, secret);
  acc += mix16(in + len - 16, secret + 16);
  return avalanche(acc);
}

/// Inputs of 129 to 240 bytes: eight mixes, an avalanche, the remaining 16-byte rounds and the end.
CPRR_HD inline uint64_t hash_len_129to240(const uint8_t* in, std::size_t len,
                                          const uint8_t* secret) {
  constexpr std::size_t kStartOffset = 3;
  constexpr std::size_t kLastOffset = 136 - 17;  // XXH3_SECRET_SIZE_MIN - XXH3_MIDSIZE_LASTOFFSET
  uint64_t acc = len * kPrime64_1;
  for (std::size_t i = 0; i < 8; ++i) acc += mix16(in + 16 * i, secret + 16 * i);
  acc = avalanche(acc);
  const std::size_t rounds = len / 16;
  for (std::size_t i = 8; i < rounds; ++i) {
    acc += mix16(in + 16 * i, secret + 16 * (i - 8) + kStartOffset);
  }
  acc += mix16(in + len - 16, secret + kLastOffset);
  return avalanche(acc);
}

/// Any input of at most 240 bytes (the only lengths where XXH3 does not use accumulators).
CPRR_HD inline uint64_t hash_short(const uint8_t* in, std::size_t len, const uint8_t* secret) {
  if (len <= 16) return hash_len_0to16(in, len, secret);
  if (len <= 128) return hash_len_17to128(in, len, secret);
  return hash_len_129to240(in, len, secret);
}

// ---- Long inputs (> 240 bytes), as per-lane pieces ----

/// Initial value of accumulator lane `lane` (0..7), XXH3_INIT_ACC.
CPRR_HD inline uint64_t init_acc(unsigned lane) {
  switch (lane) {
    case 0:
      return kPrime32_3;
    case 1:
      return kPrime64_1;
    case 2:
      return kPrime64_2;
    case 3:
      return kPrime64_3;
    case 4:
      return kPrime64_4;
    case 5:
      return kPrime32_2;
    case 6:
      return kPrime64_5;
    default:
      return kPrime32_1;
  }
}

/// Stripe contributions gathered for one accumulator lane j before they are applied: `products`
/// belong to lane j itself, `words` (the raw data words j) belong to lane j^1.
struct LaneSums {
  uint64_t products = 0;
  uint64_t words = 0;
};

/// Adds stripe word j (`word`) keyed with secret word j (`key`) to lane j's sums.
CPRR_HD inline void add_stripe_word(LaneSums& sums, uint64_t word, uint64_t key) {
  const uint64_t keyed = word ^ key;
  sums.products += (keyed & 0xFFFFFFFFu) * (keyed >> 32);
  sums.words += word;
}

/// Applies a lane's gathered sums: its own products plus the words its partner lane (j^1) read.
CPRR_HD inline uint64_t apply_sums(uint64_t acc, uint64_t own_products, uint64_t partner_words) {
  return acc + own_products + partner_words;
}

/// XXH3's per-block scramble of one accumulator lane with secret word j of the scramble key.
CPRR_HD inline uint64_t scramble_lane(uint64_t acc, uint64_t key) {
  acc ^= acc >> 47;
  acc ^= key;
  return acc * kPrime32_1;
}

/// Where a long input's blocks end: full scrambled blocks, then stripes of the last partial block
/// (at most 15); the last 64 bytes are always accumulated once more as the "last stripe".
struct LongShape {
  std::size_t full_blocks;
  unsigned tail_stripes;
};

/// The shape of a long input of `len` (> 240) bytes, as XXH3_hashLong_internal_loop splits it.
CPRR_HD inline LongShape long_shape(std::size_t len) {
  const std::size_t blocks = (len - 1) / kBlockBytes;
  return {blocks, static_cast<unsigned>(((len - 1) - blocks * kBlockBytes) / kStripeBytes)};
}

/// Accumulates `stripes` consecutive stripes at `in` keyed from `key` (8 bytes further per stripe).
CPRR_HD inline void accumulate(uint64_t acc[8], const uint8_t* in, std::size_t stripes,
                               const uint8_t* key) {
  LaneSums sums[kAccLanes];
  for (std::size_t s = 0; s < stripes; ++s) {
    CPRR_XXH3_UNROLL
    for (unsigned j = 0; j < kAccLanes; ++j) {
      add_stripe_word(sums[j], read_le64(in + s * kStripeBytes + 8 * j),
                      read_le64(key + 8 * (s + j)));
    }
  }
  CPRR_XXH3_UNROLL
  for (unsigned j = 0; j < kAccLanes; ++j) {
    acc[j] = apply_sums(acc[j], sums[j].products, sums[j ^ 1].words);
  }
}

/// Folds the eight accumulators into the hash of a long input of `len` bytes (XXH3_mergeAccs).
CPRR_HD inline uint64_t merge_accs(const uint64_t acc[8], const uint8_t* secret, std::size_t len) {
  uint64_t result = static_cast<uint64_t>(len) * kPrime64_1;
  CPRR_XXH3_UNROLL
  for (unsigned i = 0; i < 4; ++i) {
    const uint8_t* key = secret + kMergeSecret + 16 * i;
    result += mul128_fold64(acc[2 * i] ^ read_le64(key), acc[2 * i + 1] ^ read_le64(key + 8));
  }
  return avalanche(result);
}

/// Inputs of more than 240 bytes: scrambled 1024-byte blocks, the partial block, the last stripe.
CPRR_HD inline uint64_t hash_long(const uint8_t* in, std::size_t len, const uint8_t* secret) {
  uint64_t acc[kAccLanes];
  for (unsigned j = 0; j < kAccLanes; ++j) acc[j] = init_acc(j);
  const LongShape shape = long_shape(len);
  for (std::size_t b = 0; b < shape.full_blocks; ++b) {
    accumulate(acc, in + b * kBlockBytes, kStripesPerBlock, secret);
    for (unsigned j = 0; j < kAccLanes; ++j) {
      acc[j] = scramble_lane(acc[j], read_le64(secret + kScrambleSecret + 8 * j));
    }
  }
  accumulate(acc, in + shape.full_blocks * kBlockBytes, shape.tail_stripes, secret);
  accumulate(acc, in + len - kStripeBytes, 1, secret + kLastStripeSecret);
  return merge_accs(acc, secret, len);
}

}  // namespace cprr::kernels::xxh3

namespace cprr::kernels {

/// XXH3_64bits_withSeed(data, len, 0) computed with the given 192-byte secret (the seed-0 secret
/// from cprr::xxh3_seed0_secret() reproduces libxxhash); the sequential twin of the device hasher.
CPRR_HD inline uint64_t xxh3_64_seed0(const void* data, std::size_t len, const uint8_t* secret) {
  const auto* in = static_cast<const uint8_t*>(data);
  if (len <= xxh3::kMidsizeMax) return xxh3::hash_short(in, len, secret);
  return xxh3::hash_long(in, len, secret);
}

}  // namespace cprr::kernels

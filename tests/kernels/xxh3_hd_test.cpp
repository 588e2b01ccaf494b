// Host tests of the single-source XXH3 (kernels/xxh3_hd.h) against libxxhash, of the secret it is
// fed, of whole_hash_of_chunks and of poison_host. The device hasher runs this same code, so these
// run in CI without a GPU and pin down everything but the warp split.
#define XXH_STATIC_LINKING_ONLY
#include "kernels/xxh3_hd.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/hash.h"
#include "kernels/poison.h"
#include "runtime/error.h"

namespace cprr::kernels {
namespace {

// Seeded random bytes, regenerable from the seed alone.
std::vector<uint8_t> random_bytes(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

class Xxh3HdTest : public ::testing::Test {
 protected:
  const std::array<uint8_t, 192> secret_ = xxh3_seed0_secret();

  // Compares the CPRR_HD hash with libxxhash for `len` bytes starting `offset` bytes into `data`.
  void expect_same(const std::vector<uint8_t>& data, std::size_t offset, std::size_t len) {
    ASSERT_LE(offset + len, data.size());
    const uint8_t* p = data.data() + offset;
    ASSERT_EQ(xxh3_64_seed0(p, len, secret_.data()), XXH3_64bits_withSeed(p, len, 0))
        << "len " << len << " offset " << offset;
  }
};

TEST_F(Xxh3HdTest, Seed0SecretIsTheDefaultSecret) {
  // XXH3_64bits uses the built-in secret; hashing with the generated one gives the same results
  // in every length class, so the generated secret is that secret (without cprr carrying it).
  const auto data = random_bytes(5000, 1);
  for (std::size_t len : {0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025, 5000}) {
    EXPECT_EQ(XXH3_64bits_withSecret(data.data(), len, secret_.data(), secret_.size()),
              XXH3_64bits(data.data(), len))
        << "len " << len;
    EXPECT_EQ(XXH3_64bits_withSeed(data.data(), len, 0), XXH3_64bits(data.data(), len));
  }
  std::array<uint8_t, 192> direct{};
  XXH3_generateSecret_fromSeed(direct.data(), 0);
  EXPECT_EQ(direct, secret_);
}

TEST_F(Xxh3HdTest, EveryLengthUpTo1100AtMisalignedStarts) {
  // Covers all length classes: 0, 1-3, 4-8, 9-16, 17-128, 129-240 and long inputs with 0 or 1
  // full blocks, each partial-block stripe count and both last-stripe alignments.
  const auto data = random_bytes(1100 + 16, 2);
  for (std::size_t offset : {0, 1, 3, 7, 8}) {
    for (std::size_t len = 0; len <= 1100; ++len) expect_same(data, offset, len);
  }
}

TEST_F(Xxh3HdTest, RandomLengthsUpTo300KiB) {
  constexpr std::size_t kMax = 300 * 1024;
  const auto data = random_bytes(kMax + 16, 3);
  std::mt19937_64 rng(4);
  std::uniform_int_distribution<std::size_t> len_dist(0, kMax);
  for (int i = 0; i < 100; ++i) {
    const std::size_t len = len_dist(rng);
    for (std::size_t offset : {0, 1, 5, 8}) expect_same(data, offset, len);
  }
  // Block and chunk boundaries, where an off-by-one in the block count would show.
  for (std::size_t len : {kHashChunkBytes - 1, kHashChunkBytes, kHashChunkBytes + 1,
                          std::size_t{64 * 1024 - 64}, std::size_t{1024 * 17}, kMax}) {
    expect_same(data, 3, len);
  }
}

TEST_F(Xxh3HdTest, LongShapeMatchesTheReferenceLoop) {
  // A full 64 KiB chunk: 63 scrambled blocks, 15 partial stripes, then the last stripe.
  EXPECT_EQ(xxh3::long_shape(kHashChunkBytes).full_blocks, 63u);
  EXPECT_EQ(xxh3::long_shape(kHashChunkBytes).tail_stripes, 15u);
  EXPECT_EQ(xxh3::long_shape(241).full_blocks, 0u);
  EXPECT_EQ(xxh3::long_shape(241).tail_stripes, 3u);
  EXPECT_EQ(xxh3::long_shape(1025).full_blocks, 1u);
  EXPECT_EQ(xxh3::long_shape(1025).tail_stripes, 0u);
}

TEST(WholeHashOfChunks, MatchesHashBuffer) {
  const auto data = random_bytes(3 * kHashChunkBytes + 17, 5);
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{240}, kHashChunkBytes,
                            kHashChunkBytes + 1, data.size()}) {
    const Digest d = hash_buffer(data.data(), bytes);
    ASSERT_EQ(d.chunks.size(), hash_chunk_count(bytes));
    EXPECT_EQ(whole_hash_of_chunks(d.chunks.data(), d.chunks.size(), bytes), d.whole)
        << "bytes " << bytes;
  }
  EXPECT_EQ(hash_buffer(nullptr, 0).whole, XXH3_64bits_withSeed(nullptr, 0, 0));
}

TEST(WholeHashOfChunks, RejectsAChunkCountThatDoesNotFitTheLength) {
  const uint64_t chunks[2] = {1, 2};
  EXPECT_THROW(whole_hash_of_chunks(chunks, 2, kHashChunkBytes), Error);
  EXPECT_THROW(whole_hash_of_chunks(chunks, 1, 0), Error);
}

TEST(PoisonHost, PatternIsPositionalAtOddSizesAndOffsets) {
  constexpr uint64_t kPattern = 0x0123456789ABCDEFULL;
  constexpr uint8_t kGuard = 0x5A;
  for (std::size_t offset : {0, 1, 3, 7, 8}) {
    for (std::size_t bytes : {0, 1, 7, 8, 9, 15, 16, 17, 1000, 4097}) {
      std::vector<uint8_t> buf(offset + bytes + 16, kGuard);
      poison_host(buf.data() + offset, bytes, kPattern);
      for (std::size_t i = 0; i < buf.size(); ++i) {
        const bool inside = i >= offset && i < offset + bytes;
        const uint8_t want =
            inside ? static_cast<uint8_t>(kPattern >> (8 * ((i - offset) % 8))) : kGuard;
        ASSERT_EQ(buf[i], want) << "offset " << offset << " bytes " << bytes << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace cprr::kernels

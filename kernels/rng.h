#pragma once
// Deterministic random numbers defined bit for bit (std:: distributions are implementation-
// defined, so they cannot promise the same stream on every platform or on a GPU).
#include <cstdint>

#include "kernels/hd.h"

namespace cprr {

/// SplitMix64 finalizer: a bijective mix of 64 bits.
CPRR_HD inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Counter-based value i of stream `seed`: any element regenerable in O(1), on host or device.
CPRR_HD inline uint64_t random_at(uint64_t seed, uint64_t i) {
  return splitmix64(seed ^ splitmix64(i));
}

/// Uniform float in [-1, 1) from 24 random bits: exactly representable, identical everywhere.
CPRR_HD inline float random_unit_float(uint64_t seed, uint64_t i) {
  return static_cast<float>(static_cast<int32_t>(random_at(seed, i) >> 40) - (1 << 23)) /
         static_cast<float>(1 << 23);
}

/// A sequential generator (xorshift-style over SplitMix64) for host-side case logic.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  void reseed(uint64_t seed) { state_ = seed; }
  uint64_t next() { return splitmix64(state_++); }
  /// Uniform integer in [lo, hi] (inclusive). Modulo bias is irrelevant for test inputs.
  int64_t uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t state_;
};

}  // namespace cprr

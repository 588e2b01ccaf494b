// Device chunk hashing (one warp per 64 KiB chunk) and poisoning. (The stream delay a replay
// amplifies races with is runtime/cuda_window.h's launch_delay.)
//
// Chunk hashing: a chunk's 1024-byte blocks depend on each other through XXH3's per-block
// scramble, so the parallelism inside a chunk is the 16 stripes x 8 accumulator lanes of a block.
// Thread t of a warp owns accumulator lane j = t % 8 for stripe group g = t / 8 (stripes g, g+4,
// g+8, g+12): one warp-wide 8-byte load reads 4 consecutive stripes (256 contiguous bytes). Each
// thread sums its stripes' contributions (xxh3::LaneSums), the warp adds the four groups' sums
// with shuffles, and every thread then holds the same accumulator lane j and scrambles it. Several
// blocks are loaded before any is used so enough bytes are in flight to keep HBM busy.
#include <algorithm>
#include <array>
#include <mutex>
#include <vector>

#include "kernels/device_hash.h"
#include "kernels/hash.h"
#include "kernels/poison.h"
#include "kernels/xxh3_hd.h"
#include "runtime/cuda_check.h"

namespace cprr::kernels {
namespace {

namespace x = xxh3;

// The seed-0 secret as little-endian words. Every accumulate and scramble key offset is a multiple
// of 8, so lane j's key for stripe s is word s + j and its scramble key is word 16 + j.
__constant__ uint64_t c_secret[x::kSecretBytes / 8];

constexpr unsigned kWarpSize = 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr unsigned kGroups = kWarpSize / x::kAccLanes;                 // 4 stripe groups
constexpr unsigned kStripesPerThread = x::kStripesPerBlock / kGroups;  // 4 per block
constexpr unsigned kGroupStride = kGroups * x::kStripeBytes;           // 256 bytes
constexpr unsigned kBlocksInFlight = 4;  // 4 KiB per warp loaded ahead of use
constexpr unsigned kHashThreads = 256;

__device__ const uint8_t* secret_bytes() { return reinterpret_cast<const uint8_t*>(c_secret); }

// An 8-byte word of input: one aligned load when the buffer allows it, else byte loads.
template <bool kAligned>
__device__ uint64_t load_word(const uint8_t* p) {
  if constexpr (kAligned) {
    return __ldg(reinterpret_cast<const unsigned long long*>(p));
  } else {
    return x::read_le64(p);
  }
}

// Adds the four stripe groups' sums (lanes t, t^8, t^16, t^24) and applies them to accumulator
// lane j, whose raw-word share was read by the partner lane j^1 (thread t^1).
__device__ uint64_t apply_warp_sums(uint64_t acc, x::LaneSums sums) {
  for (unsigned offset = x::kAccLanes; offset < kWarpSize; offset *= 2) {
    sums.products += __shfl_xor_sync(kFullMask, sums.products, offset);
    sums.words += __shfl_xor_sync(kFullMask, sums.words, offset);
  }
  return x::apply_sums(acc, sums.products, __shfl_xor_sync(kFullMask, sums.words, 1));
}

// The thread's share of one warp: accumulator lane, stripe group, and their secret keys.
struct LaneKeys {
  unsigned j;
  unsigned g;
  uint64_t stripe[kStripesPerThread];
  uint64_t scramble;
};

__device__ LaneKeys lane_keys(unsigned t) {
  constexpr auto kLanes = static_cast<unsigned>(x::kAccLanes);
  LaneKeys k{t % kLanes, t / kLanes, {}, 0};
#pragma unroll
  for (unsigned i = 0; i < kStripesPerThread; ++i) k.stripe[i] = c_secret[k.g + kGroups * i + k.j];
  k.scramble = c_secret[x::kScrambleSecret / 8 + k.j];
  return k;
}

// Accumulates and scrambles kBlocks full blocks starting at this thread's word `mine`.
template <bool kAligned, unsigned kBlocks>
__device__ uint64_t full_blocks(uint64_t acc, const uint8_t* mine, const LaneKeys& k) {
  uint64_t w[kBlocks][kStripesPerThread];
#pragma unroll
  for (unsigned b = 0; b < kBlocks; ++b) {
#pragma unroll
    for (unsigned i = 0; i < kStripesPerThread; ++i) {
      w[b][i] = load_word<kAligned>(mine + b * x::kBlockBytes + i * kGroupStride);
    }
  }
#pragma unroll
  for (unsigned b = 0; b < kBlocks; ++b) {
    x::LaneSums sums;
#pragma unroll
    for (unsigned i = 0; i < kStripesPerThread; ++i) x::add_stripe_word(sums, w[b][i], k.stripe[i]);
    acc = x::scramble_lane(apply_warp_sums(acc, sums), k.scramble);
  }
  return acc;
}

// The unscrambled end of a long input: the partial block's stripes (at most 15) and the last
// stripe, which takes the one free slot (stripe 15, group 3) of that step.
template <bool kAligned>
__device__ uint64_t tail(uint64_t acc, const uint8_t* in, std::size_t len, const LaneKeys& k) {
  const x::LongShape shape = x::long_shape(len);
  const uint8_t* mine = in + shape.full_blocks * x::kBlockBytes + k.g * x::kStripeBytes + 8 * k.j;
  x::LaneSums sums;
#pragma unroll
  for (unsigned i = 0; i < kStripesPerThread; ++i) {
    if (k.g + kGroups * i < shape.tail_stripes) {
      x::add_stripe_word(sums, load_word<kAligned>(mine + i * kGroupStride), k.stripe[i]);
    }
  }
  if (k.g == kGroups - 1) {
    // len - 64 is 8-byte aligned only by chance: byte loads, once per chunk.
    x::add_stripe_word(sums, x::read_le64(in + len - x::kStripeBytes + 8 * k.j),
                       x::read_le64(secret_bytes() + x::kLastStripeSecret + 8 * k.j));
  }
  return apply_warp_sums(acc, sums);
}

// Hash of one chunk of more than 240 bytes by the whole warp; every thread returns it.
template <bool kAligned>
__device__ uint64_t warp_hash_long(const uint8_t* in, std::size_t len, unsigned t) {
  const LaneKeys k = lane_keys(t);
  const std::size_t blocks = x::long_shape(len).full_blocks;
  const uint8_t* mine = in + k.g * x::kStripeBytes + 8 * k.j;
  uint64_t acc = x::init_acc(k.j);
  std::size_t b = 0;
  for (; b + kBlocksInFlight <= blocks; b += kBlocksInFlight) {
    acc = full_blocks<kAligned, kBlocksInFlight>(acc, mine + b * x::kBlockBytes, k);
  }
  for (; b < blocks; ++b) acc = full_blocks<kAligned, 1>(acc, mine + b * x::kBlockBytes, k);
  acc = tail<kAligned>(acc, in, len, k);
  uint64_t all[x::kAccLanes];
#pragma unroll
  for (unsigned j = 0; j < x::kAccLanes; ++j) all[j] = __shfl_sync(kFullMask, acc, j);
  return x::merge_accs(all, secret_bytes(), len);
}

// One warp per chunk; kAligned says the buffer (hence every chunk) starts 8-byte aligned.
template <bool kAligned>
__global__ void __launch_bounds__(kHashThreads)
    chunk_hash_kernel(const uint8_t* data, std::size_t bytes, uint64_t* chunk_hashes) {
  const std::size_t chunk = (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpSize;
  const unsigned t = threadIdx.x % kWarpSize;
  const std::size_t begin = chunk * kHashChunkBytes;
  if (begin >= bytes) return;  // the whole warp leaves together
  const std::size_t len = bytes - begin < kHashChunkBytes ? bytes - begin : kHashChunkBytes;
  if (len <= x::kMidsizeMax) {  // only a buffer's last chunk can be this short
    if (t == 0) chunk_hashes[chunk] = x::hash_short(data + begin, len, secret_bytes());
    return;
  }
  const uint64_t h = warp_hash_long<kAligned>(data + begin, len, t);
  if (t == 0) chunk_hashes[chunk] = h;
}

// Poisons the bytes before the first 8-byte-aligned address (`head`) and after the last whole
// word one by one, and the aligned middle as words of the pattern rotated to that position.
__global__ void poison_kernel(uint8_t* data, std::size_t bytes, std::size_t head,
                              uint64_t pattern) {
  const std::size_t tid = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t words = (bytes - head) / 8;
  const std::size_t tail_begin = head + 8 * words;
  if (tid < head) data[tid] = poison_byte(pattern, tid);
  if (tid < bytes - tail_begin) data[tail_begin + tid] = poison_byte(pattern, tail_begin + tid);
  const unsigned shift = 8 * (head % 8);
  const uint64_t word = shift == 0 ? pattern : (pattern >> shift) | (pattern << (64 - shift));
  auto* out = reinterpret_cast<uint64_t*>(data + head);
  for (std::size_t i = tid; i < words; i += stride) out[i] = word;
}

}  // namespace

void prepare_device_hash() {
  // Constant memory is per device, so the upload is remembered per device ordinal.
  static std::mutex mutex;
  static std::vector<bool> uploaded;
  int device = 0;
  CPRR_CUDA(cudaGetDevice(&device));
  std::lock_guard lock(mutex);
  if (uploaded.size() <= static_cast<std::size_t>(device)) uploaded.resize(device + 1, false);
  if (uploaded[device]) return;
  const std::array<uint8_t, 192> secret = xxh3_seed0_secret();
  static_assert(sizeof(c_secret) == secret.size());
  CPRR_CUDA(cudaMemcpyToSymbol(c_secret, secret.data(), secret.size()));
  // The copy goes on the legacy default stream and may return before it landed; the backend's
  // streams are non-blocking and do not wait for that stream, so a hash kernel launched next on
  // one of them could read the secret half written (seen: the first probe of a case hashed wrong
  // now and then with CUDA_MODULE_LOADING=EAGER, where no module load serializes the device).
  // Waiting for the legacy stream alone orders no other stream.
  CPRR_CUDA(cudaStreamSynchronize(nullptr));
  uploaded[device] = true;
}

void launch_chunk_hashes(const void* data, std::size_t bytes, uint64_t* chunk_hashes,
                         cudaStream_t stream) {
  if (bytes == 0) return;
  CPRR_CHECK(data != nullptr && chunk_hashes != nullptr,
             "launch_chunk_hashes: null buffer ({} bytes) or null chunk hash array", bytes);
  prepare_device_hash();
  const std::size_t threads = hash_chunk_count(bytes) * kWarpSize;
  const auto grid = static_cast<unsigned>((threads + kHashThreads - 1) / kHashThreads);
  const auto* in = static_cast<const uint8_t*>(data);
  if (reinterpret_cast<std::uintptr_t>(data) % 8 == 0) {
    chunk_hash_kernel<true><<<grid, kHashThreads, 0, stream>>>(in, bytes, chunk_hashes);
  } else {
    chunk_hash_kernel<false><<<grid, kHashThreads, 0, stream>>>(in, bytes, chunk_hashes);
  }
  CPRR_CUDA(cudaGetLastError());
}

void launch_poison(void* data, std::size_t bytes, uint64_t pattern, cudaStream_t stream) {
  if (bytes == 0) return;
  CPRR_CHECK(data != nullptr, "launch_poison: null buffer ({} bytes)", bytes);
  constexpr unsigned kThreads = 256;
  constexpr std::size_t kMaxBlocks = 4096;  // a grid-stride loop covers the rest
  const std::size_t misalign = reinterpret_cast<std::uintptr_t>(data) % 8;
  const std::size_t head = std::min(bytes, (8 - misalign) % 8);
  // At least 8 threads so the up to 7 head and 7 tail bytes each have one.
  const std::size_t work = std::max<std::size_t>((bytes - head) / 8, 8);
  const auto grid = static_cast<unsigned>(std::min((work + kThreads - 1) / kThreads, kMaxBlocks));
  poison_kernel<<<grid, kThreads, 0, stream>>>(static_cast<uint8_t*>(data), bytes, head, pattern);
  CPRR_CUDA(cudaGetLastError());
}

}  // namespace cprr::kernels

// Device-side capture hashing for the cuda backend: a chunk-hash kernel per capture above
// kRawCaptureLimit with its chunk hashes (8 bytes per 64 KiB) copied into pinned staging, small
// captures' raw bytes copied there instead, all in stream order; once the streams drained the
// whole hash is folded on the host (small captures hashed there from their bytes).
#include <cuda_runtime_api.h>

#include <vector>

#include "kernels/device_hash.h"
#include "kernels/hash.h"
#include "recorder/api/capture_hasher.h"
#include "runtime/cuda_check.h"

namespace cprr {
namespace {

/// Staging that only grows by chaining blocks, never by reallocating: a full block must not force
/// a host synchronization mid-case (that would order the streams and hide races), so space runs
/// out only when a new block cannot be allocated. Blocks are kept across cases.
template <class T, bool kOnDevice>
class StagingChain {
 public:
  struct Slot {
    T* device;  ///< nullptr unless kOnDevice
    T* host;
  };
  explicit StagingChain(std::size_t first_block) : next_block_(first_block) {}
  ~StagingChain() {
    for (Block& b : blocks_) {
      if (b.device != nullptr) cudaFree(b.device);
      cudaFreeHost(b.host);
    }
  }
  StagingChain(const StagingChain&) = delete;
  StagingChain& operator=(const StagingChain&) = delete;

  /// Room for `n` elements in one block.
  Slot take(std::size_t n) {
    while (current_ < blocks_.size() && blocks_[current_].used + n > blocks_[current_].capacity) {
      ++current_;
    }
    if (current_ == blocks_.size()) add_block(std::max(n, next_block_));
    Block& b = blocks_[current_];
    Slot s{b.device ? b.device + b.used : nullptr, b.host + b.used};
    b.used += n;
    return s;
  }
  /// Every slot handed out is finished with (after the streams drained).
  void reset() {
    for (Block& b : blocks_) b.used = 0;
    current_ = 0;
  }

 private:
  struct Block {
    T* device = nullptr;
    T* host = nullptr;
    std::size_t capacity = 0;
    std::size_t used = 0;
  };
  void add_block(std::size_t n) {
    Block b;
    b.capacity = n;
    CPRR_CUDA(cudaMallocHost(&b.host, n * sizeof(T)));
    if constexpr (kOnDevice) CPRR_CUDA(cudaMalloc(&b.device, n * sizeof(T)));
    blocks_.push_back(b);
    next_block_ = 2 * n;
  }
  std::vector<Block> blocks_;
  std::size_t current_ = 0;
  std::size_t next_block_;
};

class CudaCaptureHasher final : public CaptureHasher {
 public:
  /// Uploads the hash secret now, before the case's first op, not at its first capture.
  explicit CudaCaptureHasher(Backend& backend) : backend_(backend) {
    kernels::prepare_device_hash();
  }

  void enqueue(int stream, std::string label, const std::byte* data, uint64_t bytes,
               Capture& slot) override {
    // A small capture's raw bytes come back anyway: it is hashed from them on the host, by the
    // same definition, which spares two of its three device calls (the kernel and the chunk
    // copy), most of what a small capture cost.
    const bool small = bytes <= kRawCaptureLimit;
    const std::size_t k = small ? 0 : hash_chunk_count(bytes);
    const std::size_t raw = small ? bytes : 0;
    auto s = static_cast<cudaStream_t>(backend_.native_stream(stream));
    Pending p{&slot, bytes, k, raw, nullptr, nullptr};
    if (k > 0) {
      const auto chunks = chunks_.take(k);
      kernels::launch_chunk_hashes(data, bytes, chunks.device, s);
      CPRR_CUDA(cudaMemcpyAsync(chunks.host, chunks.device, k * sizeof(uint64_t),
                                cudaMemcpyDeviceToHost, s));
      p.chunks = chunks.host;
    }
    if (raw > 0) {
      unsigned char* dst = raw_.take(raw).host;
      CPRR_CUDA(cudaMemcpyAsync(dst, data, raw, cudaMemcpyDefault, s));
      p.raw = dst;
    }
    pending_.push_back(p);
    backend_.note_launch(stream, std::move(label));
  }

  void complete() override {
    for (const Pending& p : pending_) {
      if (p.bytes <= kRawCaptureLimit) {
        p.slot->digest = hash_buffer(p.raw, p.raw_bytes);
      } else {
        p.slot->digest.chunks.assign(p.chunks, p.chunks + p.chunk_count);
        p.slot->digest.whole = whole_hash_of_chunks(p.chunks, p.chunk_count, p.bytes);
      }
      p.slot->raw.assign(reinterpret_cast<const char*>(p.raw), p.raw_bytes);
    }
    abandon();
  }

  void abandon() override {
    pending_.clear();
    chunks_.reset();
    raw_.reset();
  }

 private:
  struct Pending {
    Capture* slot;
    uint64_t bytes;
    std::size_t chunk_count, raw_bytes;
    const uint64_t* chunks;
    const unsigned char* raw;
  };

  Backend& backend_;
  StagingChain<uint64_t, true> chunks_{std::size_t{1} << 16};     // 4 GiB of captures per block
  StagingChain<unsigned char, false> raw_{std::size_t{1} << 20};  // 256 small captures per block
  std::vector<Pending> pending_;
};

}  // namespace

std::unique_ptr<CaptureHasher> make_cuda_capture_hasher(Backend& backend) {
  return std::make_unique<CudaCaptureHasher>(backend);
}

}  // namespace cprr

// Device-side capture hashing for the cuda backend: a chunk-hash kernel per capture, the chunk
// hashes (8 bytes per 64 KiB) and small raw captures copied into pinned staging in stream order,
// and the whole hash folded on the host once the streams drained.
#include <cuda_runtime_api.h>

#include <vector>

#include "kernels/device_hash.h"
#include "recorder/capture_hasher.h"
#include "runtime/cuda_check.h"

namespace cprr {
namespace {

/// Device array + pinned host mirror of `count` elements of T, reallocated only to grow.
template <class T>
class Staging {
 public:
  ~Staging() { release(); }
  void reserve(std::size_t count) {
    if (count <= capacity_) return;
    release();
    CPRR_CUDA(cudaMalloc(&device_, count * sizeof(T)));
    CPRR_CUDA(cudaMallocHost(&host_, count * sizeof(T)));
    capacity_ = count;
  }
  std::size_t capacity() const { return capacity_; }
  T* device() const { return device_; }
  T* host() const { return host_; }

 private:
  void release() {
    if (device_ != nullptr) cudaFree(device_);
    if (host_ != nullptr) cudaFreeHost(host_);
    device_ = host_ = nullptr;
    capacity_ = 0;
  }
  T* device_ = nullptr;
  T* host_ = nullptr;
  std::size_t capacity_ = 0;
};

class CudaCaptureHasher final : public CaptureHasher {
 public:
  explicit CudaCaptureHasher(Backend& backend) : backend_(backend) {
    chunks_.reserve(1 << 16);  // 4 GiB of captures per case before the first regrowth
    raw_.reserve(64 * kRawCaptureLimit);
  }

  void enqueue(int stream, std::string label, const std::byte* data, uint64_t bytes,
               Capture& slot) override {
    const std::size_t k = hash_chunk_count(bytes);
    const std::size_t raw = bytes <= kRawCaptureLimit ? bytes : 0;
    if (chunks_used_ + k > chunks_.capacity() || raw_used_ + raw > raw_.capacity()) {
      grow(k, raw);
    }
    auto s = static_cast<cudaStream_t>(backend_.native_stream(stream));
    uint64_t* dev_chunks = chunks_.device() + chunks_used_;
    kernels::launch_chunk_hashes(data, bytes, dev_chunks, s);
    if (k > 0) {
      CPRR_CUDA(cudaMemcpyAsync(chunks_.host() + chunks_used_, dev_chunks, k * sizeof(uint64_t),
                                cudaMemcpyDeviceToHost, s));
    }
    if (raw > 0) {
      CPRR_CUDA(cudaMemcpyAsync(raw_.host() + raw_used_, data, raw, cudaMemcpyDefault, s));
    }
    pending_.push_back(Pending{&slot, chunks_used_, k, bytes, raw_used_, raw});
    chunks_used_ += k;
    raw_used_ += raw;
    backend_.note_launch(stream, std::move(label));
  }

  void complete() override {
    for (const Pending& p : pending_) {
      const uint64_t* c = chunks_.host() + p.chunk_at;
      p.slot->digest.chunks.assign(c, c + p.chunks);
      p.slot->digest.whole = whole_hash_of_chunks(c, p.chunks, p.bytes);
      p.slot->raw.assign(reinterpret_cast<const char*>(raw_.host() + p.raw_at), p.raw);
    }
    pending_.clear();
    chunks_used_ = raw_used_ = 0;
  }

 private:
  struct Pending {
    Capture* slot;
    std::size_t chunk_at, chunks;
    uint64_t bytes;
    std::size_t raw_at, raw;
  };

  // Staging is full: finish what is in flight, then make room for at least one more capture.
  void grow(std::size_t k, std::size_t raw) {
    backend_.synchronize_all();
    complete();
    chunks_.reserve(std::max(2 * chunks_.capacity(), k));
    raw_.reserve(std::max(2 * raw_.capacity(), raw));
  }

  Backend& backend_;
  Staging<uint64_t> chunks_;
  Staging<unsigned char> raw_;
  std::size_t chunks_used_ = 0;
  std::size_t raw_used_ = 0;
  std::vector<Pending> pending_;
};

}  // namespace

std::unique_ptr<CaptureHasher> make_cuda_capture_hasher(Backend& backend) {
  return std::make_unique<CudaCaptureHasher>(backend);
}

}  // namespace cprr

#include "recorder/api/capture_hasher.h"

#include "runtime/error.h"

namespace cprr {

#if CPRR_HAVE_CUDA
std::unique_ptr<CaptureHasher> make_cuda_capture_hasher(
    Backend& backend);  // cuda_capture_hasher.cpp
#endif

void hash_on_host(const std::byte* data, uint64_t bytes, Capture& slot) {
  slot.digest = hash_buffer(data, bytes);
  if (bytes <= kRawCaptureLimit) slot.raw.assign(reinterpret_cast<const char*>(data), bytes);
}

namespace {

/// Hashes on the host, inside the stream (CPU backend: device memory is host memory).
class HostCaptureHasher final : public CaptureHasher {
 public:
  explicit HostCaptureHasher(Backend& backend) : backend_(backend) {}
  void enqueue(int stream, std::string label, const std::byte* data, uint64_t bytes,
               Capture& slot) override {
    backend_.enqueue_host(stream, std::move(label),
                          [&slot, data, bytes] { hash_on_host(data, bytes, slot); });
  }

 private:
  Backend& backend_;
};

}  // namespace

std::unique_ptr<CaptureHasher> make_capture_hasher(Backend& backend) {
  if (!backend.device_kernels()) return std::make_unique<HostCaptureHasher>(backend);
#if CPRR_HAVE_CUDA
  return make_cuda_capture_hasher(backend);
#else
  CPRR_THROW("backend {} runs on a device, but this build has no device hashing", backend.name());
#endif
}

}  // namespace cprr

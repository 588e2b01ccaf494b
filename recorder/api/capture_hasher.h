#pragma once
// Hashing captures (probes and outputs) in stream order, by the definition in kernels/hash.h. The
// CPU backend hashes on the stream's thread; the CUDA backend hashes on the device
// (kernels/device_hash) and copies back only the chunk hashes and, for small captures, the raw
// bytes, so a 256 MiB output costs a kernel, not a 256 MiB copy to the host.
#include <cstdint>
#include <memory>
#include <string>

#include "data/capture.h"
#include "runtime/backend.h"

namespace cprr {

class CaptureHasher {
 public:
  virtual ~CaptureHasher() = default;
  /// Hashes `bytes` at `data` when `stream` reaches this point. `slot` must keep its address
  /// until complete(); it gets the digest and, up to kRawCaptureLimit, the raw bytes.
  virtual void enqueue(int stream, std::string label, const std::byte* data, uint64_t bytes,
                       Capture& slot) = 0;
  /// After every stream drained: fills the slots that are still pending.
  virtual void complete() {}
  /// Forgets pending slots without touching them (their Context is going away unfinished).
  virtual void abandon() {}
};

/// Hashes `bytes` at host memory `data` into `slot` now: its digest and, up to kRawCaptureLimit,
/// the raw bytes.
void hash_on_host(const std::byte* data, uint64_t bytes, Capture& slot);

/// The hasher that fits `backend` (device hashing when backend.device_kernels()). It keeps a
/// reference to the backend and lives as long as the rank process.
std::unique_ptr<CaptureHasher> make_capture_hasher(Backend& backend);

#if CPRR_HAVE_CUDA
/// The device-side hasher (cuda_capture_hasher.cpp); make_capture_hasher picks it for cuda.
std::unique_ptr<CaptureHasher> make_cuda_capture_hasher(Backend& backend);
#endif

}  // namespace cprr

#include "python/native/capture/stream_order.h"

#include <stdexcept>

#ifdef CPRR_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace cprr::python::capture {

int Streams::stream(uint64_t handle) {
  auto it = streams_.find(handle);
  if (it != streams_.end()) return it->second;
  const int n = new_stream();
  streams_.emplace(handle, n);
  return n;
}

int64_t Streams::event(uint64_t handle) {
  auto it = events_.find(handle);
  if (it != events_.end()) return it->second;
  const int64_t n = new_event();
  events_.emplace(handle, n);
  return n;
}

std::pair<int, uint64_t> StreamOrder::stream_of(std::optional<c10::Device> device) {
  if (!device || !device->is_cuda()) return {host_, 0};
#ifdef CPRR_TORCH_CUDA
  const auto handle =
      reinterpret_cast<uint64_t>(c10::cuda::getCurrentCUDAStream(device->index()).stream());
  return {numbers_.stream(handle), handle};
#else
  throw std::logic_error("cprr's op capture was built against a torch without CUDA");
#endif
}

void StreamOrder::reuse_after_uses(const std::set<int>& uses, int stream) {
  for (int use : uses) {  // sorted, as the Python capture logs them
    const int64_t event = numbers_.new_event();
    order("record", "record_stream: a use the allocator waits for", use, event);
    order("wait", "memory reused after its record_stream uses", stream, event);
  }
}

void StreamOrder::pinned_used(const TensorKey& key, int stream) {
  const int64_t event = numbers_.new_event();
  order("record", "pinned memory used by a non_blocking copy", stream, event);
  pinned_uses_[key].push_back(event);
}

bool StreamOrder::pinned_reused(const TensorKey& key) {
  auto it = pinned_uses_.find(key);
  if (it == pinned_uses_.end()) return false;
  const std::vector<int64_t> events = std::move(it->second);
  pinned_uses_.erase(it);
  for (int64_t event : events) {
    order("wait", "pinned memory reused once its copies are done", -1, event);
  }
  return !events.empty();
}

}  // namespace cprr::python::capture

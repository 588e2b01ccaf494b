#pragma once
// Where a case's work runs (its CUDA streams and the host, as op-log numbers) and the orderings
// torch's allocators make around memory: python/cprr/capture/stream_order.py in C++ (which says why
// each ordering is there). Handles are cudaStream_t / cudaEvent_t values, as torch's trace hooks
// give them, so the Python hooks and this capture number a stream alike.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "python/native/capture/op_sink.h"
#include "python/native/capture/tensor_key.h"

namespace cprr::python::capture {

/// One case's CUDA streams and events as op-log numbers: stream 0 is the legacy default stream
/// (handle 0), others numbered as they first appear; events likewise from 0.
class Streams {
 public:
  int stream(uint64_t handle);
  int new_stream() { return next_stream_++; }
  int64_t event(uint64_t handle);
  void forget_event(uint64_t handle) { events_.erase(handle); }
  int64_t new_event() { return next_event_++; }

 private:
  std::unordered_map<uint64_t, int> streams_{{0, 0}};
  std::unordered_map<uint64_t, int64_t> events_;
  int next_stream_ = 1;
  int64_t next_event_ = 0;
};

/// The case's streams and host (-1 on a device backend, 0 on cpu), and the orderings logged
/// into `sink`.
class StreamOrder {
 public:
  StreamOrder(OpSink& sink, int host) : sink_(sink), host_(host) {}

  int host() const { return host_; }
  Streams& numbers() { return numbers_; }
  /// (op-log stream, cudaStream_t) where an op on `device` runs: the device's current stream,
  /// or the host for nullopt and the CPU.
  std::pair<int, uint64_t> stream_of(std::optional<c10::Device> device);
  std::pair<int, uint64_t> stream_of(const at::Tensor& t) {
    return stream_of(t.is_cuda() ? std::optional<c10::Device>(t.device()) : std::nullopt);
  }
  void order(const char* kind, const std::string& what, int stream, int64_t event = -1) {
    sink_.library_order(kind, what, stream, event);
  }
  /// A freed memory's reuse waits for the streams record_stream named (`uses`), from `stream`.
  void reuse_after_uses(const std::set<int>& uses, int stream);
  /// A non_blocking copy on `stream` uses the pinned host memory at `key`.
  void pinned_used(const TensorKey& key, int stream);
  /// Host memory at `key` is handed out again: the host waits for the copies that used it.
  bool pinned_reused(const TensorKey& key);

 private:
  OpSink& sink_;
  int host_;
  Streams numbers_;
  std::unordered_map<TensorKey, std::vector<int64_t>, TensorKeyHash> pinned_uses_;
};

}  // namespace cprr::python::capture

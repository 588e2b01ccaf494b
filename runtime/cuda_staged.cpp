#include "runtime/cuda_staged.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include "runtime/cuda_check.h"
#include "runtime/cuda_window.h"

namespace cprr {
namespace {

// Gloo's own timeout must never fire before the controller's deadline (as on the cpu backend):
// the controller diagnoses hangs and ends the world.
constexpr std::chrono::hours kCommTimeout{24};
// A staging buffer grows to at least this, and at least doubles, so a case's growing buffers
// allocate pinned memory a few times, not at every call.
constexpr std::size_t kMinStaging = std::size_t{4} << 20;
constexpr std::size_t kAlign = 256;

std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::size_t element_sum(const std::vector<int64_t>& counts) {
  return static_cast<std::size_t>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
}

}  // namespace

cudaEvent_t take_spare_event(std::vector<cudaEvent_t>& spare) {
  if (!spare.empty()) {
    cudaEvent_t e = spare.back();
    spare.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  CPRR_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

PinnedBuffer::PinnedBuffer(std::size_t bytes) : size_(bytes) {
  void* p = nullptr;
  // Mapped: the hold kernel reads the flag, and copies reach staging, through the host address.
  CPRR_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
  data_ = static_cast<std::byte*>(p);
  std::memset(data_, 0, bytes);
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  std::swap(data_, o.data_);
  std::swap(size_, o.size_);
  return *this;
}

StagedCollectives::StagedCollectives(int rank, int world_size, int device,
                                     const std::string& rendezvous, int prepared_lanes)
    : rank_(rank),
      world_size_(world_size),
      device_(device),
      comm_(rank, world_size, rendezvous,
            std::chrono::duration_cast<std::chrono::milliseconds>(kCommTimeout)) {
  for (int i = 0; i < prepared_lanes; ++i) staging(lane(i), kPreparedBytes);
}

StagedCollectives::~StagedCollectives() {
  for (auto& l : lanes_) {
    l->thread.reset();  // runs what is queued (nothing, once the streams drained) and joins
  }
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

StagedCollectives::Lane& StagedCollectives::lane(int index) {
  while (static_cast<int>(lanes_.size()) <= index) {
    auto l = std::make_unique<Lane>();
    const int id = static_cast<int>(lanes_.size());
    l->thread = std::make_unique<CpuStream>(id, fmt::format("gloo lane of stream {}", id));
    l->flag = PinnedBuffer(sizeof(uint64_t));
    lanes_.push_back(std::move(l));
  }
  return *lanes_[index];
}

std::byte* StagedCollectives::staging(Lane& l, std::size_t bytes) {
  if (l.staging.size() < bytes) {
    // Work queued on this stream may still copy from the old buffer: it lives until the case
    // ends. Later calls of the stream use the new one, in stream order after the old ones.
    const std::size_t grown = std::max({bytes, 2 * l.staging.size(), kMinStaging});
    if (l.staging.data() != nullptr) l.outgrown.push_back(std::move(l.staging));
    l.staging = PinnedBuffer(grown);
  }
  return l.staging.data();
}

void StagedCollectives::case_started() {
  for (auto& l : lanes_) l->outgrown.clear();
}

cudaEvent_t StagedCollectives::take_event() {
  std::lock_guard lock(mu_);
  return take_spare_event(events_);
}

void StagedCollectives::give_event(cudaEvent_t e) {
  std::lock_guard lock(mu_);
  events_.push_back(e);
}

void StagedCollectives::note_error(const std::string& what) {
  std::lock_guard lock(mu_);
  if (error_.empty()) error_ = what;
}

void StagedCollectives::check_async() const {
  CPRR_CHECK(!aborted_.load(),
             "the Gloo collectives were aborted (the controller gave up on this case)");
  std::lock_guard lock(mu_);
  if (!error_.empty()) CPRR_THROW("rank {}: a staged Gloo collective failed: {}", rank_, error_);
}

void StagedCollectives::await(cudaEvent_t ready) const {
  for (int polls = 0;; ++polls) {
    const cudaError_t r = cudaEventQuery(ready);
    if (r == cudaSuccess) return;
    if (r != cudaErrorNotReady) CPRR_CUDA(r);
    CPRR_CHECK(!aborted_.load(), "aborted while waiting for the stream");
    if (polls < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void StagedCollectives::host_step(Lane& l, cudaStream_t s, const std::string& label,
                                  HostPart host) {
  cudaEvent_t ready = take_event();
  // Recorded before the lane may query it: an event never recorded reads as complete.
  CPRR_CUDA(cudaEventRecord(ready, s));
  const uint64_t ticket = ++l.issued;
  auto* flag = reinterpret_cast<uint64_t*>(l.flag.data());
  l.thread->enqueue(label, [this, ready, ticket, flag, host = std::move(host)] {
    try {
      cudaSetDevice(device_);  // the lane's thread has no current device of its own
      await(ready);
      host();
    } catch (const std::exception& e) {
      note_error(e.what());
    }
    give_event(ready);
    // Released on every path: a failed call must not hold its stream forever (the error is
    // thrown when the host next waits on a stream).
    std::atomic_ref<uint64_t>(*flag).store(ticket, std::memory_order_release);
  });
  launch_wait_signal(flag, ticket, s);
}

void StagedCollectives::issue(int index, cudaStream_t s, const CollectiveCall& c) {
  CPRR_CHECK(!aborted_.load(), "{}: the Gloo collectives were aborted", c.kind);
  Lane& l = lane(index);
  const std::size_t elem = dtype_size(c.dtype);
  std::size_t in_bytes = 0, out_bytes = 0;
  bool in_place = false;  // the result replaces the input in staging
  if (c.kind == "all_reduce" || c.kind == "broadcast") {
    in_bytes = out_bytes = c.count * elem;
    in_place = true;
  } else if (c.kind == "all_gather") {
    in_bytes = c.count * elem;
    out_bytes = in_bytes * static_cast<std::size_t>(world_size_);
  } else if (c.kind == "all_to_all_v") {
    in_bytes = element_sum(c.send_counts) * elem;
    out_bytes = element_sum(c.recv_counts) * elem;
  } else if (c.kind == "send") {
    in_bytes = c.count * elem;
  } else if (c.kind == "recv") {
    out_bytes = c.count * elem;
  } else if (c.kind != "barrier") {
    CPRR_THROW("unknown collective '{}'", c.kind);
  }
  std::byte* base = staging(l, aligned(in_bytes) + (in_place ? 0 : out_bytes));
  std::byte* result = in_place ? base : base + aligned(in_bytes);
  if (in_bytes > 0) CPRR_CUDA(cudaMemcpyAsync(base, c.in, in_bytes, cudaMemcpyDefault, s));
  host_step(l, s, fmt::format("{} #{}", c.kind, c.seq),
            [this, c, base, result] { run_gloo(c, base, result); });
  if (out_bytes > 0) {
    CPRR_CUDA(cudaMemcpyAsync(c.out, result, out_bytes, cudaMemcpyDefault, s));
  }
}

void StagedCollectives::run_gloo(const CollectiveCall& c, std::byte* in, std::byte* out) {
  const auto tag = static_cast<uint32_t>(c.seq);
  if (c.kind == "all_reduce") {
    comm_.all_reduce(in, c.count, c.dtype, c.op, tag);
  } else if (c.kind == "broadcast") {
    comm_.broadcast(in, c.count, c.dtype, c.root, tag);
  } else if (c.kind == "all_gather") {
    comm_.all_gather(in, out, c.count, c.dtype, tag);
  } else if (c.kind == "all_to_all_v") {
    comm_.all_to_all_v(in, c.send_counts, out, c.recv_counts, c.dtype, tag);
  } else if (c.kind == "barrier") {
    comm_.barrier(tag);
  } else if (c.kind == "send") {
    comm_.send(in, c.count, c.dtype, c.root, tag);
  } else if (c.kind == "recv") {
    comm_.recv(out, c.count, c.dtype, c.root, tag);
  }
}

void StagedCollectives::issue_symmetric_all_reduce(int index, cudaStream_t s,
                                                   const CollectiveCall& c,
                                                   std::vector<const std::byte*> peers) {
  CPRR_CHECK(!aborted_.load(), "{}: the Gloo collectives were aborted", c.kind);
  CPRR_CHECK(static_cast<int>(peers.size()) == world_size_,
             "symmetric all_reduce: {} peer windows for {} ranks", peers.size(), world_size_);
  Lane& l = lane(index);
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  // Staging holds every rank's bytes side by side; the sum lands in the first slot.
  std::byte* base = staging(l, aligned(bytes) * static_cast<std::size_t>(world_size_));
  const auto tag = static_cast<uint32_t>(c.seq);
  const std::string label = fmt::format("{} #{} (symmetric)", c.kind, c.seq);
  // Tags of their own (as the cpu backend's): the barriers match no other collective.
  host_step(l, s, label, [this, tag] {
    comm_.barrier(tag | 0x80000000u);  // every rank's input is in its window
  });
  for (int r = 0; r < world_size_; ++r) {
    CPRR_CUDA(cudaMemcpyAsync(base + aligned(bytes) * r, peers[r], bytes, cudaMemcpyDefault, s));
  }
  host_step(l, s, label, [this, c, tag, bytes, base] {
    comm_.barrier(tag | 0x40000000u);  // every rank has read before any rank writes its result
    for (int r = 1; r < world_size_; ++r) {
      GlooComm::reduce_into(base, base + aligned(bytes) * r, c.count, c.dtype, c.op);
    }
  });
  if (bytes > 0) CPRR_CUDA(cudaMemcpyAsync(c.out, base, bytes, cudaMemcpyDefault, s));
}

int StagedCollectives::min_over_ranks(int value) {
  comm_.all_reduce(&value, 1, DType::i32, ReduceOp::min, internal_tag());
  return value;
}

std::vector<std::byte> StagedCollectives::all_gather_bytes(const void* mine, std::size_t bytes) {
  std::vector<std::byte> all(bytes * static_cast<std::size_t>(world_size_));
  comm_.all_gather(mine, all.data(), bytes, DType::u8, internal_tag());
  return all;
}

}  // namespace cprr

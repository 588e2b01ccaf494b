// Context: what a case's own library does, for cases whose collectives and memory are not cprr's
// (Python cases): its captures, its collectives' progress for the watchdog and the flight record,
// its memory and its ops for the op log.
#include <charconv>
#include <cstring>
#include <numeric>

#include "kernels/hash.h"
#include "kernels/poison.h"
#include "recorder/api/context.h"
#if CPRR_HAVE_CUDA
#include "kernels/device_hash.h"
#endif

namespace cprr {

void ForeignProgress::reset() {
  std::lock_guard lock(mu_);
  progress_.reset();
}

void ForeignProgress::enter(uint64_t seq, const std::string& kind) {
  std::lock_guard lock(mu_);
  if (!progress_) progress_.emplace();
  progress_->entered_seq = static_cast<int64_t>(seq);
  progress_->entered_kind = kind;
}

void ForeignProgress::complete(uint64_t seq, const std::string& kind) {
  std::lock_guard lock(mu_);
  if (!progress_) progress_.emplace();
  progress_->completed_seq = static_cast<int64_t>(seq);
  progress_->completed_kind = kind;
}

std::optional<CollectiveProgress> ForeignProgress::get() const {
  std::lock_guard lock(mu_);
  return progress_;
}

void Context::capture_memory(bool is_output, std::string name, const std::byte* data,
                             uint64_t bytes, DType dtype, std::vector<int64_t> shape,
                             void* native) {
  if (bytes % dtype_size(dtype) != 0) {
    CPRR_THROW_AS(CaseFailure, "{} '{}': {} bytes are not a multiple of {} ({})",
                  is_output ? "output" : "probe", name, bytes, dtype_size(dtype),
                  dtype_name(dtype));
  }
  std::deque<Capture>& list = is_output ? outputs_ : probes_;
  if (shape.empty()) shape = {static_cast<int64_t>(bytes / dtype_size(dtype))};
  Capture& slot = list.emplace_back();
  slot.seq = static_cast<uint32_t>(list.size() - 1);
  slot.name = name;
  slot.dtype = dtype;
  slot.shape = std::move(shape);
  slot.bytes = bytes;
  slot.stream = 0;
  const char* kind = is_output ? "output" : "probe";
  log_op(0, kind, name, Access{});
  if (state_.capture) {
    // Stream 0 takes the hash after what the library's stream did so far, and the library's
    // stream goes on only after the hash: a later in-place update cannot reach the bytes early.
    state_.backend->follow_native(0, native);
    state_.hasher->enqueue(0, fmt::format("{} {}", kind, name), data, bytes, slot);
    state_.backend->lead_native(native, 0);
    // Host memory the case keeps writing (a CPU tensor) is hashed before the call returns.
    if (!state_.backend->device_kernels()) state_.backend->synchronize(0);
  }
  issued();
}

uint64_t Context::enter_collective(std::string kind, DType dtype, uint64_t bytes, int32_t root,
                                   ReduceOp op) {
  const uint64_t seq = next_collective_++;
  logs_.collectives.push_back(CollectiveRecord{seq, kind, 0, dtype, bytes, root, op});
  if (state_.flight) state_.flight->enter(logs_.collectives.back());
  state_.foreign->enter(seq, kind);
  log_op(0, "collective", std::move(kind), Access{});
  return seq;
}

void Context::complete_collective(uint64_t seq) {
  for (auto it = logs_.collectives.rbegin(); it != logs_.collectives.rend(); ++it) {
    if (it->seq == seq) {
      state_.foreign->complete(seq, it->kind);
      return;
    }
  }
  CPRR_THROW_AS(CaseFailure, "no collective #{} was entered in this case", seq);
}

uint32_t Context::track_memory(std::string name, std::byte* data, uint64_t bytes, bool device,
                               void* native) {
  const uint32_t id = next_buffer_++;
  if (timeline_) logs_.timeline.allocs.push_back(steady_now_ns());
  logs_.allocs.push_back(AllocRecord{logs_.allocs.size(), false, id, std::move(name), "tensor",
                                     bytes, reinterpret_cast<uint64_t>(data), 0});
  if (perturbation_.poison != 0 && bytes > 0) {
    if (!device) {
      kernels::poison_host(data, bytes, perturbation_.poison);
    } else {
#if CPRR_HAVE_CUDA
      kernels::launch_poison(data, bytes, perturbation_.poison, static_cast<cudaStream_t>(native));
#endif
    }
  }
  return id;
}

void Context::library_op(std::string name, const std::vector<Touch>& reads,
                         const std::vector<Touch>& writes) {
  OpRecord& op = log_op(0, "kernel", std::move(name), Access{});
  for (const Touch& t : reads) {
    op.reads.push_back(t.buffer);
    op.read_spans.push_back(t.span);
  }
  for (const Touch& t : writes) {
    op.writes.push_back(t.buffer);
    op.write_spans.push_back(t.span);
  }
}

void Context::note_p2p(std::string kind, int peer, DType dtype, uint64_t bytes) {
  if (peer < 0 || peer >= world_size()) {
    CPRR_THROW_AS(CaseFailure, "{} with peer {}: the world has ranks 0..{}", kind, peer,
                  world_size() - 1);
  }
  // A host op with no accesses: it shows in the op log and the trace, and numbers no collective
  // (the happens-before check pairs ranks' collectives by their order).
  log_op(-1, "host",
         fmt::format("{} {} bytes ({}) {} rank {}", kind, bytes, dtype_name(dtype),
                     kind == "send" ? "to" : "from", peer),
         Access{});
}

}  // namespace cprr

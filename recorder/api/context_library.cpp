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
                                   ReduceOp op, int stream) {
  const uint64_t seq = next_collective_++;
  logs_.collectives.push_back(CollectiveRecord{seq, kind, stream, dtype, bytes, root, op});
  if (state_.flight) state_.flight->enter(logs_.collectives.back());
  state_.foreign->enter(seq, kind);
  log_op(stream, "collective", std::move(kind), Access{}, -1, true);
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

LibraryMemory& Context::library_memory() {
  if (!state_.library) {
    state_.library = std::make_unique<LibraryMemory>(state_);
    state_.library->open_case();
  }
  return *state_.library;
}

uint32_t Context::track_memory(std::string name, std::byte* data, uint64_t bytes, bool device,
                               void* native, int64_t written_by,
                               std::optional<uint64_t> symmetric_offset) {
  if (written_by >= static_cast<int64_t>(logs_.ops.size())) {
    CPRR_THROW_AS(CaseFailure, "'{}' is said to be written by op #{}, which is not logged yet",
                  name, written_by);
  }
  const uint32_t id = next_buffer_++;
  if (timeline_) logs_.timeline.allocs.push_back(steady_now_ns());
  logs_.allocs.push_back(AllocRecord{logs_.allocs.size(), false, id, std::move(name),
                                     symmetric_offset ? "torch_symmetric" : "tensor", bytes,
                                     symmetric_offset.value_or(reinterpret_cast<uint64_t>(data)),
                                     0});
  if (written_by >= 0) {
    OpRecord& op = logs_.ops[static_cast<std::size_t>(written_by)];
    op.writes.push_back(id);
    op.write_spans.push_back(ByteSpan{0, bytes});
    return id;
  }
  // Only memory nobody wrote is poisoned: the op that made a tensor has already written it.
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

void Context::untrack_memory(uint32_t buffer, int stream) {
  for (auto it = logs_.allocs.rbegin(); it != logs_.allocs.rend(); ++it) {
    if (it->buffer != buffer) continue;
    if (it->is_free || (it->pool != "tensor" && it->pool != "torch_symmetric")) break;
    AllocRecord freed = *it;
    freed.seq = logs_.allocs.size();
    freed.is_free = true;
    freed.stream = stream;
    if (timeline_) logs_.timeline.allocs.push_back(steady_now_ns());
    logs_.allocs.push_back(std::move(freed));
    return;
  }
  CPRR_THROW_AS(CaseFailure, "buffer {} is not a tracked tensor still live in this case", buffer);
}

Context::LibraryOp Context::library_op(std::string kind, std::string name, int stream,
                                       std::optional<void*> native, const std::vector<Touch>& reads,
                                       const std::vector<Touch>& writes) {
  const uint64_t seq = logs_.ops.size();
  if (stream >= 0 && native && state_.backend->device_kernels()) {
    if (const uint32_t us = delay_before(seq); us > 0) state_.backend->delay_native(*native, us);
  }
  OpRecord& op = log_op(stream, std::move(kind), std::move(name), Access{}, -1, true);
  for (const Touch& t : reads) {
    op.reads.push_back(t.buffer);
    op.read_spans.push_back(t.span);
  }
  for (const Touch& t : writes) {
    op.writes.push_back(t.buffer);
    op.write_spans.push_back(t.span);
  }
  return LibraryOp{seq, replay_syncs_after(seq)};
}

void Context::library_order(std::string kind, std::string name, int stream, int64_t event) {
  if (kind != "record" && kind != "wait" && kind != "sync") {
    CPRR_THROW_AS(CaseFailure, "library ordering op '{}' is not record, wait or sync", kind);
  }
  if (kind == "record" && (stream < 0 || event < 0)) {
    CPRR_THROW_AS(CaseFailure, "a record needs a stream and an event (got stream {}, event {})",
                  stream, event);
  }
  if (kind == "wait" && event < 0) CPRR_THROW_AS(CaseFailure, "a wait needs an event");
  log_op(stream, std::move(kind), std::move(name), Access{}, event, true);
  mark_end();
}

void Context::synchronize_library() { state_.backend->synchronize_device(); }

void Context::library_unseen(std::string what) {
  log_op(-1, "unseen", std::move(what), Access{}, -1, true);
  mark_end();
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

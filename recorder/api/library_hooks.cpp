// LibraryHooks: what a case's own library does, for cases whose collectives and memory are not
// cprr's (Python cases), written into its Context's logs and captures.
#include "recorder/api/library_hooks.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "kernels/poison.h"
#include "recorder/api/library_graphs.h"
#if CPRR_HAVE_CUDA
#include "kernels/device_hash.h"
#endif

namespace cprr {

void LibraryHooks::capture_memory(bool is_output, std::string name, const std::byte* data,
                                  uint64_t bytes, DType dtype, std::vector<int64_t> shape,
                                  void* native, bool host) {
  if (bytes % dtype_size(dtype) != 0) {
    CPRR_THROW_AS(CaseFailure, "{} '{}': {} bytes are not a multiple of {} ({})",
                  is_output ? "output" : "probe", name, bytes, dtype_size(dtype),
                  dtype_name(dtype));
  }
  if (shape.empty()) shape = {static_cast<int64_t>(bytes / dtype_size(dtype))};
  Capture& slot =
      ctx_.add_capture(is_output, std::move(name), dtype, std::move(shape), bytes, 0, Access{});
  RankState& state = ctx_.state_;
  if (!state.capture) {
  } else if (host || !state.backend->device_kernels()) {
    // Host memory the case keeps writing (a CPU tensor, on any backend) is hashed on the host
    // before the call returns, once what the library's stream did so far (a copy into it) is done.
    state.backend->follow_native(0, native);
    state.backend->synchronize(0);
    hash_on_host(data, bytes, slot);
  } else {
    // Stream 0 takes the hash after what the library's stream did so far, and the library's
    // stream goes on only after the hash: a later in-place update cannot reach the bytes early.
    state.backend->follow_native(0, native);
    state.hasher->enqueue(0, fmt::format("{} {}", is_output ? "output" : "probe", slot.name), data,
                          bytes, slot);
    state.backend->lead_native(native, 0);
  }
  ctx_.issued();
}

namespace {

// The watchdog's words for a collective or message: "all_reduce", "all_reduce (group 2)",
// "recv #3 from rank 0".
std::string progress_kind(const CollectiveRecord& c) {
  if (c.is_p2p()) {
    return fmt::format("{} #{} {} rank {}{}", c.kind, c.seq, c.kind == "send" ? "to" : "from",
                       c.peer, c.group == 0 ? "" : fmt::format(" (group {})", c.group));
  }
  return c.group == 0 ? c.kind : fmt::format("{} (group {})", c.kind, c.group);
}

// Appends `t` to an op's buffers and their spans.
void add_touch(const LibraryHooks::Touch& t, std::vector<uint32_t>& ids,
               std::vector<ByteSpan>& spans) {
  ids.push_back(t.buffer);
  spans.push_back(t.span);
}

// An op's buffers and spans (parallel) as touches; a buffer without a span is whole.
std::vector<LibraryHooks::Touch> touches_of(const std::vector<uint32_t>& ids,
                                            const std::vector<ByteSpan>& spans) {
  std::vector<LibraryHooks::Touch> out;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    out.push_back({ids[k], k < spans.size() ? spans[k] : ByteSpan{0, ~uint64_t{0}}});
  }
  return out;
}

// launch_params.h's accesses as an op's touches.
std::vector<LibraryHooks::Touch> as_touches(const std::vector<PointedTouch>& pointed) {
  std::vector<LibraryHooks::Touch> out;
  out.reserve(pointed.size());
  for (const PointedTouch& t : pointed) out.push_back(LibraryHooks::Touch{t.buffer, t.span});
  return out;
}

}  // namespace

uint64_t LibraryHooks::enter_collective(CollectiveRecord c) {
  if (c.is_p2p()) {
    if (c.peer >= ctx_.world_size()) {
      CPRR_THROW_AS(CaseFailure, "{} with peer {}: the world has ranks 0..{}", c.kind, c.peer,
                    ctx_.world_size() - 1);
    }
    // A host op with no accesses: it shows in the op log and the trace.
    ctx_.log_op(-1, "host",
                fmt::format("{} {} bytes ({}) {} rank {}", c.kind, c.bytes, dtype_name(c.dtype),
                            c.kind == "send" ? "to" : "from", c.peer),
                Access{});
    c.stream = -1;
  }
  const std::size_t at = ctx_.enter(std::move(c), Access{}, true);
  const CollectiveRecord& entered = ctx_.logs_.collectives[at];
  ctx_.state_.foreign->enter(entered.seq, progress_kind(entered));
  return at;
}

void LibraryHooks::complete_collective(uint64_t handle) {
  const std::vector<CollectiveRecord>& collectives = ctx_.logs_.collectives;
  if (handle >= collectives.size()) {
    CPRR_THROW_AS(CaseFailure, "no collective #{} was entered in this case", handle);
  }
  const CollectiveRecord& c = collectives[handle];
  ctx_.state_.foreign->complete(c.seq, progress_kind(c));
}

void LibraryHooks::collective_raised(uint64_t handle) {
  if (handle >= ctx_.logs_.collectives.size()) {
    CPRR_THROW_AS(CaseFailure, "no collective #{} was entered in this case", handle);
  }
  ctx_.raised_.insert(handle);
}

void LibraryHooks::note_group(GroupRecord group) {
  std::vector<GroupRecord>& groups = ctx_.logs_.groups;
  const auto same = [&](const GroupRecord& g) { return g.id == group.id; };
  if (std::find_if(groups.begin(), groups.end(), same) == groups.end()) {
    groups.push_back(std::move(group));
  }
}

LibraryMemory& LibraryHooks::library_memory() {
  RankState& state = ctx_.state_;
  if (!state.library) {
    state.library = std::make_unique<LibraryMemory>(state);
    state.library->open_case();
  }
  return *state.library;
}

uint32_t LibraryHooks::track_memory(std::string name, std::byte* data, uint64_t bytes, bool device,
                                    void* native, int64_t written_by,
                                    std::optional<uint64_t> symmetric_offset) {
  CaseCapture& logs = ctx_.logs_;
  if (written_by >= static_cast<int64_t>(logs.ops.size())) {
    CPRR_THROW_AS(CaseFailure, "'{}' is said to be written by op #{}, which is not logged yet",
                  name, written_by);
  }
  const uint32_t id = ctx_.next_buffer_++;
  if (ctx_.timeline_) logs.timeline.allocs.push_back(steady_now_ns());
  logs.allocs.push_back(AllocRecord{logs.allocs.size(), false, id, std::move(name),
                                    symmetric_offset ? "torch_symmetric" : "tensor", bytes,
                                    symmetric_offset.value_or(reinterpret_cast<uint64_t>(data)),
                                    0});
  // Kept up to date once a launch needed it (a place in the windows is no address).
  if (ctx_.library_tensors_ && !symmetric_offset) {
    ctx_.library_tensors_->add(KnownMemory{reinterpret_cast<uint64_t>(data), bytes, id});
  }
  if (written_by >= 0) {
    OpRecord* held = ctx_.library_graphs_ ? ctx_.library_graphs_->held(written_by) : nullptr;
    // Made by an op a graph capture held: that op writes it at each launch.
    OpRecord& op = held ? *held : logs.ops[static_cast<std::size_t>(written_by)];
    op.writes.push_back(id);
    op.write_spans.push_back(ByteSpan{0, bytes});
    return id;
  }
  // Only memory nobody wrote is poisoned: the op that made a tensor has already written it.
  const uint64_t poison = ctx_.perturbation_.poison;
  if (poison != 0 && bytes > 0) {
    if (!device) {
      kernels::poison_host(data, bytes, poison);
    } else {
#if CPRR_HAVE_CUDA
      kernels::launch_poison(data, bytes, poison, static_cast<cudaStream_t>(native));
#endif
    }
  }
  return id;
}

void LibraryHooks::untrack_memory(uint32_t buffer, int stream) {
  ctx_.end_probe();  // before its memory can be handed out again
  std::vector<AllocRecord>& allocs = ctx_.logs_.allocs;
  for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) {
    if (it->buffer != buffer) continue;
    if (it->is_free || (it->pool != "tensor" && it->pool != "torch_symmetric")) break;
    if (ctx_.library_tensors_) ctx_.library_tensors_->remove(buffer);
    AllocRecord freed = *it;
    freed.seq = allocs.size();
    freed.is_free = true;
    freed.stream = stream;
    if (ctx_.timeline_) ctx_.logs_.timeline.allocs.push_back(steady_now_ns());
    allocs.push_back(std::move(freed));
    return;
  }
  CPRR_THROW_AS(CaseFailure, "buffer {} is not a tracked tensor still live in this case", buffer);
}

LibraryHooks::LibraryOp LibraryHooks::library_op(std::string kind, std::string name, int stream,
                                                 std::optional<void*> native,
                                                 const std::vector<Touch>& reads,
                                                 const std::vector<Touch>& writes, bool moves,
                                                 const std::vector<Touch>& touches, bool probe) {
  const uint64_t seq = ctx_.logs_.ops.size();
  if (captured(stream)) {
    // Not run now: logged at each launch of its graph. The op in its place touches nothing.
    ctx_.log_op(stream, "captured", kind + " " + name, Access{}, -1, true);
    OpRecord held{seq, stream, std::move(kind), std::move(name)};
    held.moves = moves;
    for (const Touch& t : reads) add_touch(t, held.reads, held.read_spans);
    for (const Touch& t : writes) add_touch(t, held.writes, held.write_spans);
    for (const Touch& t : touches) add_touch(t, held.touches, held.touch_spans);
    graphs().hold(std::move(held));
    return LibraryOp{seq, false};
  }
  Backend& backend = *ctx_.state_.backend;
  if (stream >= 0 && native && backend.device_kernels()) {
    if (const uint32_t us = ctx_.delay_before(seq); us > 0) backend.delay_native(*native, us);
  }
  OpRecord& op = ctx_.log_op(stream, std::move(kind), std::move(name), Access{}, -1, true);
  op.moves = moves;
  for (const Touch& t : reads) add_touch(t, op.reads, op.read_spans);
  for (const Touch& t : writes) add_touch(t, op.writes, op.write_spans);
  for (const Touch& t : touches) add_touch(t, op.touches, op.touch_spans);
  if (probe) ctx_.begin_probe(op);
  return LibraryOp{seq, ctx_.replay_syncs_after(seq)};
}

LibraryGraphs& LibraryHooks::graphs() {
  if (!ctx_.library_graphs_) ctx_.library_graphs_ = std::make_unique<LibraryGraphs>();
  return *ctx_.library_graphs_;
}

bool LibraryHooks::captured(int stream) const {
  return ctx_.library_graphs_ && ctx_.library_graphs_->holds(stream);
}

void LibraryHooks::begin_graph_capture(int stream) {
  ctx_.end_probe(true);  // its device sync must come before the capture opens
  graphs().begin(stream);
  if (ctx_.state_.library) ctx_.state_.library->set_capture_open(true);
}

uint32_t LibraryHooks::end_graph_capture(int stream) {
  const uint32_t graph = graphs().end(stream);
  if (ctx_.state_.library) ctx_.state_.library->set_capture_open(false);
  return graph;
}

std::optional<LibraryHooks::LibraryOp> LibraryHooks::launch_graph(uint32_t graph, int stream,
                                                                  std::optional<void*> native) {
  const std::vector<OpRecord>* ops = graphs().ops(graph);
  if (ops == nullptr) {
    CPRR_THROW_AS(CaseFailure, "CUDA graph #{} was not captured in this case", graph);
  }
  std::optional<LibraryOp> last;
  bool sync_after = false;
  // A launch inside another capture holds these ops again, in the open capture's own list:
  // this graph's stays where it is.
  for (const OpRecord& op : *ops) {
    last = library_op(op.kind, fmt::format("{} in graph #{}", op.name, graph), stream, native,
                      touches_of(op.reads, op.read_spans), touches_of(op.writes, op.write_spans),
                      op.moves, touches_of(op.touches, op.touch_spans), false);
    sync_after = sync_after || last->sync_after;
  }
  if (last) last->sync_after = sync_after;
  return last;
}

LiveMemory& LibraryHooks::live_memory() {
  if (!ctx_.library_tensors_) {
    // The first launch or copy of the case: the tracked tensors so far, from the allocation log
    // (in its order, so a later track at a reused address replaces the earlier one); tracks and
    // frees keep it from here on, so cases without either pay nothing for it.
    auto live = std::make_unique<LiveMemory>();
    for (const AllocRecord& a : ctx_.logs_.allocs) {
      if (a.pool != "tensor") continue;  // torch_symmetric's offset is a place, not an address
      if (a.is_free) {
        live->remove(a.buffer);
      } else {
        live->add(KnownMemory{a.offset, a.bytes, a.buffer});
      }
    }
    ctx_.library_tensors_ = std::move(live);
  }
  return *ctx_.library_tensors_;
}

LibraryHooks::LibraryOp LibraryHooks::library_launch(std::string name, int stream,
                                                     std::optional<void*> native,
                                                     const std::vector<KernelParam>& layout,
                                                     std::span<const std::byte> values) {
  return library_op("kernel", std::move(name), stream, native, {}, {}, false,
                    as_touches(pointed_touches(layout, values, live_memory())));
}

std::optional<LibraryHooks::LibraryOp> LibraryHooks::library_copy(std::string name, int stream,
                                                                  std::optional<void*> native,
                                                                  uint64_t dst, uint64_t src,
                                                                  uint64_t bytes, bool is_set) {
  const std::vector<Touch> reads =
      is_set ? std::vector<Touch>{} : as_touches(range_touches(src, bytes, live_memory()));
  const std::vector<Touch> writes = as_touches(range_touches(dst, bytes, live_memory()));
  if (reads.empty() && writes.empty()) return std::nullopt;
  return library_op("copy", std::move(name), stream, native, reads, writes, !is_set);
}

void LibraryHooks::library_order(std::string kind, std::string name, int stream, int64_t event) {
  if (kind != "record" && kind != "wait" && kind != "sync") {
    CPRR_THROW_AS(CaseFailure, "library ordering op '{}' is not record, wait or sync", kind);
  }
  if (kind == "record" && (stream < 0 || event < 0)) {
    CPRR_THROW_AS(CaseFailure, "a record needs a stream and an event (got stream {}, event {})",
                  stream, event);
  }
  if (kind == "wait" && event < 0) CPRR_THROW_AS(CaseFailure, "a wait needs an event");
  if (ctx_.library_graphs_ && ctx_.library_graphs_->order(kind, stream, event)) {
    // An ordering inside a graph capture is the graph's own: it orders nothing now, and a
    // launch takes the graph's ops as one stream, so it is not held for the launches either.
    ctx_.log_op(stream, "captured", kind + " " + name, Access{}, -1, true);
    return;
  }
  ctx_.log_op(stream, std::move(kind), std::move(name), Access{}, event, true);
  ctx_.mark_end();
}

void LibraryHooks::hold_probe() { ctx_.hold_probe(); }

void LibraryHooks::release_probe() { ctx_.end_probe(true); }

void LibraryHooks::synchronize_library() { ctx_.state_.backend->synchronize_device(); }

void LibraryHooks::distrust_transport(std::string why) {
  if (ctx_.state_.distrusted.empty()) ctx_.state_.distrusted = std::move(why);
}

void LibraryHooks::library_unseen(std::string what) {
  ctx_.log_op(-1, "unseen", std::move(what), Access{}, -1, true);
  ctx_.mark_end();
}

}  // namespace cprr

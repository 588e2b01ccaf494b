// Context, the core: buffers, streams, events, launches, native work, one-sided ops and the end of
// a case. Collectives and captures are context_capture.cpp; what a case's own library reports
// (Python cases) is library_hooks.cpp.
#include "recorder/api/context.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <numeric>

#include "kernels/hash.h"
#include "kernels/poison.h"
#include "recorder/api/launch_params.h"
#include "recorder/api/library_graphs.h"
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
  // Each group and channel numbers its own calls: one entered after a higher-numbered one
  // completed is still waited in (entered_seq > completed_seq says so).
  if (progress_->completed_seq >= progress_->entered_seq) progress_->completed_seq = -1;
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

Buffer Buffer::slice(uint64_t offset, uint64_t len) const {
  if (offset > bytes || len > bytes - offset) {
    CPRR_THROW_AS(CaseFailure, "slice [{}, {}) is outside buffer {} of {} bytes", offset,
                  offset + len, id, bytes);
  }
  return Buffer{id, ptr + offset, len, pool};
}

Context::Context(RankState& state, std::string case_name, Params params, uint64_t seed,
                 Placement placement, uint64_t execution, Perturbation perturbation, bool timeline)
    : state_(state),
      name_(std::move(case_name)),
      params_(std::move(params)),
      seed_(seed),
      placement_(placement),
      rng_(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(state.rank) + 1))),
      execution_(execution),
      perturbation_(std::move(perturbation)),
      timeline_(timeline) {
  // The case seed (the same on every rank) seeds the shuffled policy.
  for (auto& engine : state_.engines) engine->set_policy(placement_, seed_);
  if (state_.library) state_.library->open_case();
  if (!state_.hasher) state_.hasher = make_capture_hasher(*state_.backend);
  if (state_.flight) state_.flight->begin(execution_);
  if (timeline_) {
    state_.backend->begin_marks();
    logs_.timeline.start_ns = steady_now_ns();
  }
  world_.ctx_ = this;
  world_.rank_ = state_.rank;
  for (int r = 0; r < state_.world_size; ++r) world_.ranks_.push_back(r);
}

const std::string& Context::param(std::string_view key) const {
  auto it = params_.find(std::string(key));
  if (it == params_.end()) {
    CPRR_THROW_AS(CaseFailure, "case {} has no parameter '{}' (check its grid)", name_, key);
  }
  return it->second;
}

int64_t Context::param_int(std::string_view key) const {
  const std::string& v = param(key);
  int64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size()) {
    CPRR_THROW_AS(CaseFailure, "parameter '{}' = '{}' is not an integer", key, v);
  }
  return out;
}

Buffer Context::alloc(std::string name, uint64_t bytes, MemPool pool, Stream s) {
  PlacementEngine& engine = *state_.engines[static_cast<int>(pool)];
  const uint64_t offset = engine.allocate(bytes);
  const uint32_t id = next_buffer_++;
  Live live{pool, offset, bytes, std::move(name)};
  log_alloc(false, id, live, s.id);
  live_.emplace(id, std::move(live));
  const Buffer b{id, state_.backend->arena_base(pool) + offset, bytes, pool};
  if (perturbation_.poison != 0) poison(b, s);
  return b;
}

void Context::poison(const Buffer& b, Stream s) {
  // Host-accessible memory (every CPU pool, the CUDA host pool) is filled at once; device memory
  // in stream order, before anything the case enqueues on that stream.
  if (!state_.backend->device_kernels() || b.pool == MemPool::host) {
    kernels::poison_host(b.ptr, b.bytes, perturbation_.poison);
    return;
  }
#if CPRR_HAVE_CUDA
  kernels::launch_poison(b.ptr, b.bytes, perturbation_.poison,
                         static_cast<cudaStream_t>(state_.backend->native_stream(s.id)));
  state_.backend->synchronize(s.id);  // every stream may touch it next
#endif
}

void Context::free(const Buffer& b) {
  auto it = live_.find(b.id);
  if (it == live_.end()) CPRR_THROW_AS(CaseFailure, "free of buffer {} which is not live", b.id);
  const Live& live = it->second;
  if (b.ptr != state_.backend->arena_base(live.pool) + live.offset) {
    CPRR_THROW_AS(CaseFailure, "free of a slice of buffer {} ('{}'): free the whole buffer", b.id,
                  live.name);
  }
  state_.engines[static_cast<int>(live.pool)]->release(live.offset);
  log_alloc(true, b.id, live, 0);
  live_.erase(it);
}

void Context::log_alloc(bool is_free, uint32_t id, const Live& live, int stream) {
  if (timeline_) logs_.timeline.allocs.push_back(steady_now_ns());
  logs_.allocs.push_back(AllocRecord{logs_.allocs.size(), is_free, id, live.name,
                                     std::string(mem_pool_name(live.pool)), live.bytes, live.offset,
                                     stream});
}

ByteSpan Context::span_of(const Buffer& b) const {
  const auto it = live_.find(b.id);
  // A buffer no longer live (declared after its free: the case's own bug) keeps its id; without
  // its base the whole of it is the honest span.
  if (it == live_.end()) return ByteSpan{0, b.bytes};
  const std::byte* base = state_.backend->arena_base(it->second.pool) + it->second.offset;
  return ByteSpan{static_cast<uint64_t>(b.ptr - base), b.bytes};
}

OpRecord& Context::log_op(int stream, std::string kind, std::string name, const Access& access,
                          int64_t event, bool library) {
  end_probe();  // the probed op ran before anything logged after it
  const uint64_t seq = logs_.ops.size();
  if (stream >= 0 && !library) {
    if (const uint32_t us = delay_before(seq); us > 0) state_.backend->delay(stream, us);
  }
  OpRecord op{seq, stream, std::move(kind), std::move(name), {}, {}, event};
  const auto add = [this](const std::vector<Buffer>& from, std::vector<uint32_t>& ids,
                          std::vector<ByteSpan>& spans) {
    for (const Buffer& b : from) {
      ids.push_back(b.id);
      spans.push_back(span_of(b));
    }
  };
  add(access.reads, op.reads, op.read_spans);
  add(access.writes, op.writes, op.write_spans);
  add(access.uses, op.touches, op.touch_spans);
  if (timeline_) {
    mark_end();  // an op that issued nothing (a failed call) ends where the next one starts
    OpTime& t = logs_.timeline.ops.emplace_back();
    if (stream >= 0 && op.kind != "sync" && !library) {
      state_.backend->mark(stream);
      mark_slots_.emplace_back(seq, false);
    } else {
      t.begin_ns = steady_now_ns();
      if (op.kind == "host") t.end_ns = t.begin_ns;  // a declaration: the host's work is around it
    }
  }
  last_op_library_ = library;
  OpRecord& logged = logs_.ops.emplace_back(std::move(op));
  // A library op's touches come after (LibraryHooks probes); a host access is made after it is
  // declared, past any point the probe could end at.
  if (!library && stream >= 0) begin_probe(logged);
  return logs_.ops[seq];
}

void Context::mark_end() {
  if (!timeline_ || ended_ops_ == logs_.ops.size()) return;
  const OpRecord& op = logs_.ops.back();
  ended_ops_ = logs_.ops.size();
  OpTime& t = logs_.timeline.ops.back();
  if (op.stream >= 0 && op.kind != "sync" && !last_op_library_) {
    state_.backend->mark(op.stream);
    mark_slots_.emplace_back(op.seq, true);
  } else if (t.end_ns < 0) {
    t.end_ns = steady_now_ns();
  }
}

void Context::collect_marks() {
  const std::vector<int64_t> times = state_.backend->marks();
  for (std::size_t i = 0; i < mark_slots_.size() && i < times.size(); ++i) {
    const auto [seq, is_end] = mark_slots_[i];
    OpTime& t = logs_.timeline.ops[seq];
    (is_end ? t.end_ns : t.begin_ns) = times[i];
  }
}

uint32_t Context::delay_before(uint64_t seq) const {
  const Perturbation& p = perturbation_;
  const OpSite here{state_.rank, seq};
  for (const OpSite& site : p.delay_ops) {
    if (site == here) return p.target_delay_us;
  }
  if (p.delay_seed == 0 || p.max_delay_us == 0) return 0;
  const uint64_t h = splitmix64(p.delay_seed ^ splitmix64((uint64_t(state_.rank) << 40) ^ seq));
  if (h % 3 != 0) return 0;  // about one stream op in three waits
  return static_cast<uint32_t>((h >> 8) % (uint64_t{p.max_delay_us} + 1));
}

void Context::issued() {
  end_probe();
  if (logs_.ops.empty()) return;
  mark_end();
  if (replay_syncs_after(logs_.ops.back().seq)) state_.backend->synchronize_all();
}

bool Context::replay_syncs_after(uint64_t seq) const {
  if (perturbation_.one_stream) return true;
  return std::any_of(perturbation_.sync_after.begin(), perturbation_.sync_after.end(),
                     [&](const OpSite& site) {
                       return site.seq == seq && (site.rank == state_.rank || site.rank == -1);
                     });
}

Stream Context::create_stream(std::string name) {
  // A serializing replay folds every stream into the default one: all ops run in issue order.
  if (perturbation_.one_stream) return Stream{0};
  const int id = state_.backend->stream(streams_used_++, name);
  return Stream{id};
}

Event Context::record(Stream s) {
  const int ev = state_.backend->create_event();
  log_op(s.id, "record", "record", {}, ev);
  state_.backend->record_event(ev, s.id);
  issued();
  return Event{ev};
}

void Context::wait(Stream s, Event e) {
  log_op(s.id, "wait", "wait", {}, e.id);
  state_.backend->wait_event(s.id, e.id);
  issued();
}

void Context::synchronize(Stream s) {
  log_op(s.id, "sync", "synchronize stream", {});
  state_.backend->synchronize(s.id);
  mark_end();
}

void Context::synchronize() {
  log_op(-1, "sync", "synchronize all", {});
  state_.backend->synchronize_all();
  mark_end();
}

void Context::copy(Stream s, const Buffer& dst, const Buffer& src, uint64_t bytes) {
  if (bytes == UINT64_MAX) bytes = src.bytes;
  if (bytes > src.bytes || bytes > dst.bytes) {
    CPRR_THROW_AS(CaseFailure, "copy of {} bytes from buffer {} ({} bytes) to buffer {} ({} bytes)",
                  bytes, src.id, src.bytes, dst.id, dst.bytes);
  }
  log_op(s.id, "copy", "copy", Access{{src.slice(0, bytes)}, {dst.slice(0, bytes)}});
  state_.backend->copy_async(s.id, dst.ptr, src.ptr, bytes);
  issued();
}

void Context::read_bytes(Stream s, const Buffer& b, void* dst, uint64_t bytes) {
  log_op(s.id, "copy", "read back", Access{{b}, {}});
  state_.backend->copy_async(s.id, dst, b.ptr, bytes);
  mark_end();
  state_.backend->synchronize(s.id);
}

void Context::native(Stream s, std::string name, const Access& access,
                     const std::function<void(void*)>& fn) {
  log_op(s.id, "native", name, access);
  if (state_.backend->device_kernels()) {
    fn(state_.backend->native_stream(s.id));
    state_.backend->note_launch(s.id, "native " + name);
  } else {
    state_.backend->enqueue_host(s.id, "native " + name, [fn] { fn(nullptr); });
  }
  issued();
}

void* Context::native_stream(Stream s) {
  log_op(-1, "handle", fmt::format("native_stream(stream {})", s.id), Access{});
  return state_.backend->native_stream(s.id);
}

void* Context::native_comm() {
  log_op(-1, "handle", "native_comm()", Access{});
  return state_.backend->native_comm();
}

void Context::host_access(std::string name, const Access& access) {
  log_op(-1, "host", std::move(name), access);
  issued();
}

// ---- one-sided ----

uint32_t Context::one_sided_slot(const char* what, int peer, Semaphore sem,
                                 bool in_peer_table) const {
  if (const std::string why = state_.backend->one_sided_problem(); !why.empty()) {
    CPRR_THROW_AS(CaseFailure, "{}: the {} backend cannot do one-sided ops here: {}", what,
                  state_.backend->name(), why);
  }
  if (peer < 0 || peer >= world_size()) {
    CPRR_THROW_AS(CaseFailure, "{}: peer {} outside world of {}", what, peer, world_size());
  }
  if (sem.id >= kMaxSemaphores) {
    CPRR_THROW_AS(CaseFailure, "{}: semaphore {} is not below {} (kMaxSemaphores)", what, sem.id,
                  kMaxSemaphores);
  }
  // Slot sem * W + src of the receiver's table is written only by rank src.
  const int src = in_peer_table ? rank() : peer;
  return sem.id * static_cast<uint32_t>(world_size()) + static_cast<uint32_t>(src);
}

void Context::put(Stream s, int peer, const Buffer& dst, const Buffer& src) {
  one_sided_slot("put", peer, Semaphore{}, true);
  if (dst.pool != MemPool::symmetric) {
    CPRR_THROW_AS(CaseFailure,
                  "put into buffer {}: only symmetric buffers (MemPool::symmetric) are windows",
                  dst.id);
  }
  if (src.bytes > dst.bytes) {
    CPRR_THROW_AS(CaseFailure, "put of {} bytes (buffer {}) into {} bytes (buffer {})", src.bytes,
                  src.id, dst.bytes, dst.id);
  }
  const Buffer target = dst.slice(0, src.bytes);
  const auto pool_offset =
      static_cast<uint64_t>(target.ptr - state_.backend->arena_base(MemPool::symmetric));
  log_op(s.id, "put", "put", Access{{src}, {target}}).peer = peer;
  state_.backend->put(s.id, peer, pool_offset, src.ptr, src.bytes);
  issued();
}

uint64_t Context::log_epoch_op(const char* kind, Stream s, int peer, Semaphore sem) {
  const bool sends = std::string_view(kind) == "signal";
  const uint64_t epoch = ++(sends ? signals_sent_ : waits_done_)[{peer, sem.id}];
  OpRecord& op = log_op(s.id, kind, kind, {}, sem.id);
  op.peer = peer;
  op.epoch = epoch;
  return epoch;
}

void Context::signal(Stream s, int peer, Semaphore sem) {
  const uint32_t slot = one_sided_slot("signal", peer, sem, true);
  const uint64_t epoch = log_epoch_op("signal", s, peer, sem);
  state_.backend->signal(s.id, peer, slot, semaphore_value(epoch));
  issued();
}

void Context::wait_signal(Stream s, int peer, Semaphore sem) {
  const uint32_t slot = one_sided_slot("wait_signal", peer, sem, false);
  const uint64_t epoch = log_epoch_op("wait_signal", s, peer, sem);
  state_.backend->wait_signal(s.id, slot, semaphore_value(epoch));
  issued();
}

void Context::end_groups(bool clean) {
  if (groups_ended_) return;
  groups_ended_ = true;
  state_.backend->end_groups(clean);
}

CaseCapture Context::finish(bool clean) {
  try {
    if (clean) end_probe(true);
  } catch (const std::exception&) {
    // The probed op's own error surfaced in the sync: it stays unprobed; the case's result says.
  }
  probe_.reset();
  probe_held_ = false;
  if (clean) drop_raised_collectives();
  end_groups(clean);
  if (state_.library) state_.library->close_case();
  while (!live_.empty()) {
    const auto& [id, live] = *live_.begin();
    free(Buffer{id, state_.backend->arena_base(live.pool) + live.offset, live.bytes, live.pool});
  }
  state_.backend->release_events();
  state_.hasher->complete();
  if (timeline_) {
    try {
      mark_end();
      state_.backend->synchronize_all();  // drained already, unless the body failed
    } catch (const std::exception&) {
      // A failed stream leaves its later marks unreached (-1); the body's error is the news.
    }
    collect_marks();
  }
  finished_ = true;
  logs_.probes.assign(std::make_move_iterator(probes_.begin()),
                      std::make_move_iterator(probes_.end()));
  logs_.outputs.assign(std::make_move_iterator(outputs_.begin()),
                       std::make_move_iterator(outputs_.end()));
  return std::move(logs_);
}

void Context::drain() { state_.backend->synchronize_all(); }

Context::~Context() {
  if (finished_) return;
  if (state_.library) state_.library->close_case();
  try {
    drain();
  } catch (const std::exception&) {
  }
  try {
    end_groups(false);
  } catch (const std::exception&) {
  }
  state_.hasher->abandon();
}

}  // namespace cprr

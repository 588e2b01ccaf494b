#include "runtime/cpu_backend.h"

#include <fmt/format.h>

#include <cstring>

#include "runtime/error.h"

namespace cprr {
namespace {

// Arena sizes are virtual reservations (MAP_NORESERVE); a case pays only for pages it touches.
constexpr uint64_t kArenaBytes[] = {uint64_t{16} << 30, uint64_t{4} << 30, uint64_t{4} << 30};

// Gloo's own timeout must never fire before the controller's per-case deadline does: the
// controller is the one that diagnoses hangs (with every rank's status) and kills the world.
constexpr std::chrono::hours kCommTimeout{24};

}  // namespace

std::string_view mem_pool_name(MemPool p) {
  switch (p) {
    case MemPool::device: return "device";
    case MemPool::symmetric: return "symmetric";
    case MemPool::host: return "host";
  }
  return "?";
}

MappedRegion::MappedRegion(uint64_t bytes) : size_(bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw_errno(__FILE__, __LINE__, fmt::format("mmap({} bytes)", bytes));
  data_ = static_cast<std::byte*>(p);
}

MappedRegion::~MappedRegion() { ::munmap(data_, size_); }

CpuBackend::CpuBackend(const BackendConfig& config) {
  for (int i = 0; i < 3; ++i) arenas_[i] = std::make_unique<MappedRegion>(kArenaBytes[i]);
  if (config.world_size > 1) {
    comm_ = std::make_unique<GlooComm>(config.rank, config.world_size, config.rendezvous,
                                       std::chrono::duration_cast<std::chrono::milliseconds>(kCommTimeout));
  }
  stream(0, "default");
}

CpuBackend::~CpuBackend() {
  // Streams first: their threads may still be inside a collective that uses comm_.
  std::lock_guard lock(streams_mu_);
  streams_.clear();
}

std::byte* CpuBackend::arena_base(MemPool pool) {
  return arenas_[static_cast<int>(pool)]->data();
}

uint64_t CpuBackend::arena_capacity(MemPool pool) const {
  return arenas_[static_cast<int>(pool)]->size();
}

int CpuBackend::stream(int index, std::string_view name) {
  std::lock_guard lock(streams_mu_);
  while (static_cast<int>(streams_.size()) <= index) {
    const int id = static_cast<int>(streams_.size());
    streams_.push_back(std::make_unique<CpuStream>(id, std::string(id == index ? name : "")));
  }
  return index;
}

CpuStream& CpuBackend::at(int stream) {
  std::lock_guard lock(streams_mu_);
  CPRR_CHECK(stream >= 0 && stream < static_cast<int>(streams_.size()), "no stream {}", stream);
  return *streams_[stream];
}

void CpuBackend::enqueue_host(int stream, std::string label, std::function<void()> fn) {
  at(stream).enqueue(std::move(label), std::move(fn));
}

void CpuBackend::copy_async(int stream, void* dst, const void* src, std::size_t bytes) {
  at(stream).enqueue("copy", [dst, src, bytes] { std::memmove(dst, src, bytes); });
}

void CpuBackend::collective(int stream, CollectiveCall call) {
  std::string label = fmt::format("{} #{}", call.kind, call.seq);
  at(stream).enqueue(std::move(label), [this, call = std::move(call)] { run_collective(call); });
}

void CpuBackend::run_collective(const CollectiveCall& c) {
  {
    std::lock_guard lock(progress_mu_);
    progress_.entered_seq = static_cast<int64_t>(c.seq);
    progress_.entered_kind = c.kind;
  }
  const auto tag = static_cast<uint32_t>(c.seq);
  const std::size_t elem = dtype_size(c.dtype);
  if (!comm_) {
    // World of one: every collective is a local copy (or nothing).
    if (c.kind == "all_gather" || c.kind == "all_to_all_v") {
      const std::size_t n = c.kind == "all_gather" ? c.count : static_cast<std::size_t>(c.send_counts.at(0));
      if (n > 0) std::memmove(c.out, c.in, n * elem);
    }
  } else if (c.kind == "all_reduce") {
    comm_->all_reduce(c.out, c.count, c.dtype, c.op, tag);
  } else if (c.kind == "all_gather") {
    comm_->all_gather(c.in, c.out, c.count, c.dtype, tag);
  } else if (c.kind == "all_to_all_v") {
    comm_->all_to_all_v(c.in, c.send_counts, c.out, c.recv_counts, c.dtype, tag);
  } else if (c.kind == "broadcast") {
    comm_->broadcast(c.out, c.count, c.dtype, c.root, tag);
  } else if (c.kind == "barrier") {
    comm_->barrier(tag);
  } else {
    CPRR_THROW("unknown collective '{}'", c.kind);
  }
  std::lock_guard lock(progress_mu_);
  progress_.completed_seq = static_cast<int64_t>(c.seq);
  progress_.completed_kind = c.kind;
}

int CpuBackend::create_event() {
  events_.push_back({});
  return static_cast<int>(events_.size()) - 1;
}

void CpuBackend::record_event(int event, int stream) {
  CPRR_CHECK(event >= 0 && event < static_cast<int>(events_.size()), "no event {}", event);
  CpuStream& s = at(stream);
  events_[event] = CpuEvent{&s, s.last_ticket()};
}

void CpuBackend::wait_event(int stream, int event) {
  CPRR_CHECK(event >= 0 && event < static_cast<int>(events_.size()), "no event {}", event);
  const CpuEvent ev = events_[event];
  if (ev.stream == nullptr || ev.ticket == 0) return;  // never recorded, or recorded on an idle stream
  CpuStream& s = at(stream);
  if (ev.stream == &s) return;  // same stream: FIFO already orders it
  s.enqueue(fmt::format("wait event {}", event), [ev] { ev.stream->wait_for(ev.ticket); });
}

void CpuBackend::synchronize(int stream) { at(stream).synchronize(); }

void CpuBackend::synchronize_all() {
  std::size_t n;
  {
    std::lock_guard lock(streams_mu_);
    n = streams_.size();
  }
  wait_each_stream(n, [this](int i) { at(i).synchronize(); });
}

CollectiveProgress CpuBackend::collective_progress() const {
  std::lock_guard lock(progress_mu_);
  return progress_;
}

std::vector<std::string> CpuBackend::running_ops() const {
  std::lock_guard lock(streams_mu_);
  std::vector<std::string> out;
  for (const auto& s : streams_) {
    std::string op = s->current_op();
    if (!op.empty()) out.push_back(fmt::format("stream {} ({}): {}", s->id(), s->name(), op));
  }
  return out;
}

void CpuBackend::reset_collective_progress() {
  std::lock_guard lock(progress_mu_);
  progress_ = CollectiveProgress{};
}

}  // namespace cprr

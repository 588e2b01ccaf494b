#include "runtime/cpu_backend.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "runtime/error.h"
#include "runtime/fd.h"
#include "runtime/host_info.h"

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
    case MemPool::device:
      return "device";
    case MemPool::symmetric:
      return "symmetric";
    case MemPool::host:
      return "host";
  }
  return "?";
}

MappedRegion::MappedRegion(uint64_t bytes) : size_(bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw_errno(__FILE__, __LINE__, fmt::format("mmap({} bytes)", bytes));
  data_ = static_cast<std::byte*>(p);
}

MappedRegion::MappedRegion(int fd, uint64_t bytes) : size_(bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED)
    throw_errno(__FILE__, __LINE__, fmt::format("mmap of a window ({} bytes)", bytes));
  data_ = static_cast<std::byte*>(p);
}

MappedRegion::~MappedRegion() { ::munmap(data_, size_); }

namespace {

uint64_t semaphore_bytes(int world_size) {
  return uint64_t{kMaxSemaphores} * static_cast<uint64_t>(world_size) * sizeof(uint64_t);
}

// Maps `path` (created when `create`) at `bytes`; the descriptor is closed once mapped.
std::unique_ptr<MappedRegion> map_window_file(const std::string& path, uint64_t bytes,
                                              bool create) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0600);
  if (fd < 0) throw_errno(__FILE__, __LINE__, fmt::format("open window file {}", path));
  const UniqueFd owner(fd);
  if (create && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    throw_errno(__FILE__, __LINE__,
                fmt::format("ftruncate window file {} to {} bytes", path, bytes));
  }
  return std::make_unique<MappedRegion>(fd, bytes);
}

}  // namespace

CpuWindow::CpuWindow(int rank, int world_size, const std::string& dir, uint64_t pool_bytes)
    : rank_(rank),
      world_size_(world_size),
      dir_(dir),
      pool_bytes_(pool_bytes),
      file_bytes_(pool_bytes + semaphore_bytes(world_size)),
      maps_(static_cast<std::size_t>(world_size)) {
  maps_[rank] = world_size == 1 || dir.empty()
                    ? std::make_unique<MappedRegion>(file_bytes_)
                    : map_window_file(path_of(rank), file_bytes_, /*create=*/true);
}

std::string CpuWindow::path_of(int rank) const { return fmt::format("{}/window-{}", dir_, rank); }

void CpuWindow::map_peers() {
  for (int r = 0; r < world_size_; ++r) {
    if (!maps_[r]) maps_[r] = map_window_file(path_of(r), file_bytes_, /*create=*/false);
  }
}

std::byte* CpuWindow::pool(int rank) const {
  CPRR_CHECK(rank >= 0 && rank < world_size_ && maps_[rank], "no window of rank {} (world of {})",
             rank, world_size_);
  return maps_[rank]->data();
}

uint64_t* CpuWindow::semaphores(int rank) const {
  return reinterpret_cast<uint64_t*>(pool(rank) + pool_bytes_);
}

CpuBackend::CpuBackend(const BackendConfig& config)
    : rank_(config.rank), world_size_(config.world_size), rendezvous_(config.rendezvous) {
  const auto sym = static_cast<int>(MemPool::symmetric);
  for (int i = 0; i < 3; ++i) {
    if (i != sym) arenas_[i] = std::make_unique<MappedRegion>(kArenaBytes[i]);
  }
  window_ = std::make_unique<CpuWindow>(config.rank, config.world_size, config.rendezvous,
                                        kArenaBytes[sym]);
  startup_.lap("arenas");
  if (config.world_size > 1) {
    comm_ = std::make_unique<GlooComm>(
        config.rank, config.world_size, config.rendezvous,
        std::chrono::duration_cast<std::chrono::milliseconds>(kCommTimeout));
    startup_.lap("gloo communicator");
    // Every rank made its window file before joining, so all of them exist now.
    window_->map_peers();
    startup_.lap("peer windows");
  }
  stream(0, "default");
}

CpuBackend::~CpuBackend() {
  // Streams first: their threads may still be inside a collective that uses comm_.
  std::lock_guard lock(streams_mu_);
  streams_.clear();
  std::lock_guard groups(groups_mu_);
  groups_.clear();
  ended_.clear();
}

std::vector<SplitVote> CpuBackend::split_votes(SplitVote mine, uint32_t tag) {
  std::vector<SplitVote> all(static_cast<std::size_t>(world_size_));
  if (!comm_) {
    all[0] = mine;
    return all;
  }
  static_assert(sizeof(SplitVote) == 2 * sizeof(int32_t));
  comm_->all_gather(&mine, all.data(), 2, DType::i32, tag);
  return all;
}

void CpuBackend::make_group(uint32_t group, SplitVote, const std::vector<int>& members) {
  const uint64_t split = splits_++;
  if (members.empty()) return;
  std::unique_ptr<GlooComm> comm;
  if (members.size() > 1) {
    comm = std::make_unique<GlooComm>(
        group_rank(members, rank_), static_cast<int>(members.size()),
        group_rendezvous(rendezvous_, split, group),
        std::chrono::duration_cast<std::chrono::milliseconds>(kCommTimeout));
  }
  std::lock_guard lock(groups_mu_);
  groups_[group] = std::move(comm);
}

void CpuBackend::end_groups(bool) {
  // Clean or not, a Gloo context waits for no peer when it goes: kept until the next case only
  // so that a peer still inside one of its collectives hangs there (see Backend::end_groups).
  std::lock_guard lock(groups_mu_);
  for (auto& [id, comm] : groups_) ended_.push_back(std::move(comm));
  groups_.clear();
}

void CpuBackend::close_ended_groups() {
  std::lock_guard lock(groups_mu_);
  ended_.clear();
}

GlooComm* CpuBackend::comm_of(uint32_t group) {
  if (group == 0) return comm_.get();
  std::lock_guard lock(groups_mu_);
  const auto it = groups_.find(group);
  CPRR_CHECK(it != groups_.end(), "rank {}: no group {} in this case", rank_, group);
  return it->second.get();
}

std::byte* CpuBackend::arena_base(MemPool pool) {
  if (pool == MemPool::symmetric) return window_->pool(rank_);
  return arenas_[static_cast<int>(pool)]->data();
}

uint64_t CpuBackend::arena_capacity(MemPool pool) const {
  if (pool == MemPool::symmetric) return window_->pool_bytes();
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
  // The watchdog's progress is the world's: a group numbers its collectives on its own.
  const bool world = c.group == 0;
  if (world) {
    std::lock_guard lock(progress_mu_);
    progress_.entered_seq = static_cast<int64_t>(c.seq);
    progress_.entered_kind = c.kind;
  }
  const auto tag = static_cast<uint32_t>(c.seq);
  const std::size_t elem = dtype_size(c.dtype);
  GlooComm* comm = comm_of(c.group);
  if (comm == nullptr) {
    // A world (or group) of one: every collective is a local copy (or nothing).
    if (c.kind == "all_gather" || c.kind == "all_to_all_v") {
      const std::size_t n =
          c.kind == "all_gather" ? c.count : static_cast<std::size_t>(c.send_counts.at(0));
      if (n > 0) std::memmove(c.out, c.in, n * elem);
    }
  } else if (world && c.kind == "all_reduce" && in_window(c.out, c.count * elem)) {
    symmetric_all_reduce(c, tag);
  } else if (world && c.kind == "all_gather" && in_window(c.out, c.count * elem * world_size_)) {
    symmetric_all_gather(c, tag);
  } else if (c.kind == "all_reduce") {
    comm->all_reduce(c.out, c.count, c.dtype, c.op, tag);
  } else if (c.kind == "all_gather") {
    comm->all_gather(c.in, c.out, c.count, c.dtype, tag);
  } else if (c.kind == "all_to_all_v") {
    comm->all_to_all_v(c.in, c.send_counts, c.out, c.recv_counts, c.dtype, tag);
  } else if (c.kind == "broadcast") {
    comm->broadcast(c.out, c.count, c.dtype, c.root, tag);
  } else if (c.kind == "barrier") {
    comm->barrier(tag);
  } else if (c.kind == "send") {
    comm->send(c.in, c.count, c.dtype, c.root, tag);
  } else if (c.kind == "recv") {
    comm->recv(c.out, c.count, c.dtype, c.root, tag);
  } else {
    CPRR_THROW("unknown collective '{}'", c.kind);
  }
  if (!world) return;
  std::lock_guard lock(progress_mu_);
  progress_.completed_seq = static_cast<int64_t>(c.seq);
  progress_.completed_kind = c.kind;
}

bool CpuBackend::in_window(const void* p, std::size_t bytes) const {
  const std::byte* base = window_->pool(rank_);
  const auto* b = static_cast<const std::byte*>(p);
  return b >= base && b <= base + window_->pool_bytes() &&
         bytes <= static_cast<std::size_t>(base + window_->pool_bytes() - b);
}

// NCCL's symmetric kernels assume every rank placed the buffer at the same window offset: each
// rank reads every peer's window at *its own* offset. So does this, so that a layout that differs
// across ranks gives wrong sums here as it does on a GPU (seed 002). Ranks are reduced in rank
// order, so every rank computes the same bits.
void CpuBackend::symmetric_all_reduce(const CollectiveCall& c, uint32_t tag) {
  const auto offset = static_cast<uint64_t>(static_cast<std::byte*>(c.out) - window_->pool(rank_));
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  // Tags of their own: the barriers must not match another collective's messages.
  comm_->barrier(tag | 0x80000000u);  // every rank's input is in its window
  std::vector<std::byte> acc(window_->pool(0) + offset, window_->pool(0) + offset + bytes);
  for (int r = 1; r < world_size_; ++r) {
    GlooComm::reduce_into(acc.data(), window_->pool(r) + offset, c.count, c.dtype, c.op);
  }
  comm_->barrier(tag | 0x40000000u);  // every rank has read before any rank writes its result
  std::memcpy(c.out, acc.data(), bytes);
}

// The all-gather counterpart: each rank writes its chunk into every rank's window at *its own*
// offset of the output (chunk r at offset + r * bytes), as NCCL's symmetric kernels address peers.
// With the same layout everywhere that is the all-gather; with a layout that differs, chunks land
// where the peers' outputs are not (seed 002's wrong results, now for all-gathers too).
void CpuBackend::symmetric_all_gather(const CollectiveCall& c, uint32_t tag) {
  const auto offset = static_cast<uint64_t>(static_cast<std::byte*>(c.out) - window_->pool(rank_));
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  // Its own chunk first: the input may lie in the output, where a peer's write could land.
  const auto* in = static_cast<const std::byte*>(c.in);
  const std::vector<std::byte> mine(in, in + bytes);
  comm_->barrier(tag | 0x80000000u);  // every rank is in the call: its output is free to write
  for (int r = 0; r < world_size_; ++r) {
    std::memcpy(window_->pool(r) + offset + static_cast<uint64_t>(rank_) * bytes, mine.data(),
                bytes);
  }
  comm_->barrier(tag | 0x40000000u);  // every chunk has landed
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
  if (ev.stream == nullptr || ev.ticket == 0)
    return;  // never recorded, or recorded on an idle stream
  CpuStream& s = at(stream);
  if (ev.stream == &s) return;  // same stream: FIFO already orders it
  s.enqueue(fmt::format("wait event {}", event), [ev] { ev.stream->wait_for(ev.ticket); });
}

std::string CpuBackend::device_identity() const { return host_name(); }

std::string CpuBackend::symmetric_pool() const {
  // What NCCL's symmetric kernels assume, in shared memory: see run_collective.
  return world_size_ == 1 ? "private memory (a world of one)"
                          : "shared-memory window of every rank; a symmetric all-reduce reads "
                            "peers at this rank's offset, a symmetric all-gather writes there";
}

void CpuBackend::put(int stream, int peer, uint64_t offset, const void* src, std::size_t bytes) {
  CPRR_CHECK(offset <= window_->pool_bytes() && bytes <= window_->pool_bytes() - offset,
             "put of {} bytes at offset {} is outside the symmetric pool ({} bytes)", bytes, offset,
             window_->pool_bytes());
  std::byte* dst = window_->pool(peer) + offset;
  at(stream).enqueue(fmt::format("put to rank {}", peer),
                     [dst, src, bytes] { std::memmove(dst, src, bytes); });
}

void CpuBackend::signal(int stream, int peer, uint32_t slot, uint64_t value) {
  uint64_t* target = window_->semaphores(peer) + slot;
  at(stream).enqueue(fmt::format("signal rank {} slot {} = {:#x}", peer, slot, value),
                     [target, value] {
                       // Release: the peer's acquire in wait_signal then sees every earlier write
                       // of this stream.
                       std::atomic_ref<uint64_t>(*target).store(value, std::memory_order_release);
                     });
}

void CpuBackend::wait_signal(int stream, uint32_t slot, uint64_t value) {
  uint64_t* mine = window_->semaphores(rank_) + slot;
  at(stream).enqueue(fmt::format("wait_signal slot {} >= {:#x}", slot, value), [mine, value] {
    std::atomic_ref<uint64_t> cell(*mine);
    for (int polls = 0; cell.load(std::memory_order_acquire) < value; ++polls) {
      if (polls < 256) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  });
}

void CpuBackend::delay(int stream, uint32_t us) {
  at(stream).enqueue(fmt::format("delay {} us", us),
                     [us] { std::this_thread::sleep_for(std::chrono::microseconds(us)); });
}

void CpuBackend::mark(int stream) {
  std::atomic<int64_t>* slot = &marks_.emplace_back(-1);
  at(stream).enqueue("mark", [slot] { slot->store(steady_now_ns(), std::memory_order_relaxed); });
}

std::vector<int64_t> CpuBackend::marks() {
  std::vector<int64_t> out;
  out.reserve(marks_.size());
  for (const std::atomic<int64_t>& m : marks_) out.push_back(m.load(std::memory_order_relaxed));
  return out;
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

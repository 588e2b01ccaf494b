// The CUDA backend, joining the world: connecting (NCCL or Gloo staged), the symmetric pool and
// its window (an NCCL-registered window, or peers' pools mapped through CUDA IPC), and the
// one-sided ops on that window. The rest of the backend is cuda_backend.cpp.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/cuda_backend.h"
#include "runtime/cuda_check.h"
#include "runtime/host_info.h"

namespace cprr {

std::string CudaBackend::bootstrap_id() {
  return rank_ == 0 && nccl_possible_ ? nccl_unique_id() : std::string();
}

std::string CudaBackend::device_identity() const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device_) != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("{}/device {}", host_name(), device_);  // the index alone still tells
  }
  std::string uuid;
  for (char b : prop.uuid.bytes) uuid += fmt::format("{:02x}", static_cast<unsigned char>(b));
  return fmt::format("{}/GPU-{}", host_name(), uuid);
}

void CudaBackend::connect(const ConnectSpec& spec) {
  startup_.restart();  // the wait for the controller's Bootstrap is no step of this rank
  if (spec.transport == CollectiveTransport::gloo_staged) {
    auto staged = std::make_unique<StagedCollectives>(rank_, world_size_, device_, rendezvous_);
    std::lock_guard lock(mu_);  // the watchdog's abort() reads staged_
    staged_ = std::move(staged);
  } else {
    CPRR_CHECK(spec.transport == CollectiveTransport::nccl,
               "rank {}: the cuda backend has no {} transport", rank_,
               transport_name(spec.transport));
    auto comm = std::make_unique<NcclComm>(rank_, world_size_, spec.comm_id);
    std::lock_guard lock(mu_);  // the watchdog's abort() reads comm_
    comm_ = std::move(comm);
    // NCCL joins in its own thread from here; the symmetric arena and window wait for their
    // first use (the file comment of cuda_backend.h).
    symmetric_.why = "not made: no case of this world used the symmetric pool or a collective yet";
    startup_.lap("nccl communicator (started)");
    return;
  }
  startup_.lap("gloo communicator");
  symmetric_ = make_symmetric_pool();
  startup_.lap("symmetric arena");
  make_window(symmetric_);
  symmetric_made_ = true;
  startup_.lap("symmetric window");
}

template <class Fn>
void CudaBackend::first_use(const char* name, Fn&& fn) {
  first_use_.restart();
  fn();
  first_use_.lap(name);
}

NcclComm& CudaBackend::joined_comm() {
  CPRR_CHECK(comm_ != nullptr, "rank {}: NCCL use before the communicator was connected", rank_);
  if (!comm_->joined()) {
    std::lock_guard lock(setup_mu_);
    if (!comm_->joined())
      first_use("nccl communicator (waited for)", [&] { comm_->wait_joined(); });
  }
  return *comm_;
}

void CudaBackend::ensure_symmetric() {
  if (!comm_ || symmetric_made_) return;  // staged: made while connecting
  std::lock_guard lock(setup_mu_);
  if (symmetric_made_) return;
  if (!comm_->joined()) first_use("nccl communicator (waited for)", [&] { comm_->wait_joined(); });
  CPRR_CUDA(cudaSetDevice(device_));  // the calling thread's device may be another
  guarded([&] {
    first_use("symmetric arena", [&] { symmetric_ = make_symmetric_pool(); });
    first_use("symmetric window", [&] { make_window(symmetric_); });
  });
  symmetric_made_ = true;
}

std::vector<StartupPhase> CudaBackend::take_first_use_phases() {
  std::lock_guard lock(setup_mu_);
  return first_use_.take();
}

void CudaBackend::before_communication(bool collective) {
  if (!comm_) return;
  guarded([&] {
    if (collective) ensure_symmetric();
    joined_comm();
  });
}

void CudaBackend::settle_before_exit() {
  if (comm_) comm_->settle_join();
}

void* CudaBackend::native_comm() {
  if (!comm_) return nullptr;
  ensure_symmetric();  // the caller's own NCCL calls come after it on every rank
  return joined_comm().get();
}

int CudaBackend::min_over_ranks(int value) {
  if (staged_) return staged_->min_over_ranks(value);
  // Every copy on cprr's own stream: the default stream would not order them with the
  // collective, and a case's stream would wait for the case's work.
  cudaStream_t s = setup_stream_;
  CPRR_CUDA(cudaMemcpyAsync(barrier_scratch_, &value, sizeof value, cudaMemcpyHostToDevice, s));
  CollectiveCall c{.kind = "all_reduce",
                   .dtype = DType::i32,
                   .op = ReduceOp::min,
                   .in = barrier_scratch_,
                   .out = barrier_scratch_,
                   .count = 1};
  joined_comm().issue(c, s, barrier_scratch_);
  poll_handle(s);
  CPRR_CUDA(cudaMemcpyAsync(&value, barrier_scratch_, sizeof value, cudaMemcpyDeviceToHost, s));
  CPRR_CUDA(cudaMemsetAsync(barrier_scratch_, 0, sizeof value, s));  // barrier() all-reduces zeros
  poll_handle(s);
  return value;
}

std::vector<std::byte> CudaBackend::all_gather_bytes(const void* mine, std::size_t bytes) {
  if (staged_) return staged_->all_gather_bytes(mine, bytes);
  const std::size_t total = bytes * static_cast<std::size_t>(world_size_);
  CudaArena gathered(CudaArena::Kind::device, total);
  std::byte* slot = gathered.data() + bytes * static_cast<std::size_t>(rank_);
  cudaStream_t s = setup_stream_;  // as min_over_ranks'
  CPRR_CUDA(cudaMemcpyAsync(slot, mine, bytes, cudaMemcpyHostToDevice, s));
  CollectiveCall c{
      .kind = "all_gather", .dtype = DType::u8, .in = slot, .out = gathered.data(), .count = bytes};
  joined_comm().issue(c, s, barrier_scratch_);
  poll_handle(s);  // polls, so a peer that never joins cannot block this thread in a copy
  std::vector<std::byte> all(total);
  CPRR_CUDA(cudaMemcpyAsync(all.data(), gathered.data(), total, cudaMemcpyDeviceToHost, s));
  poll_handle(s);
  return all;
}

CudaBackend::SymmetricArena CudaBackend::make_symmetric_pool() {
  const int sym = static_cast<int>(MemPool::symmetric);
  // The pool, then the semaphore table, in one allocation: one mapping reaches both.
  const uint64_t bytes = capacity_[sym] + kSemaphoreTableReserve;
  if (staged_) {
    // No NCCL communicator to register a window with: peers map it through CUDA IPC.
    arenas_[sym] = CudaArena(CudaArena::Kind::device, bytes);
    return {SymmetricArena::Kind::device,
            "collectives go through Gloo (ranks share a GPU, or --collectives gloo), so no NCCL "
            "communicator registers a window"};
  }
  std::string why;
  try {
    arenas_[sym] = CudaArena(CudaArena::Kind::nccl, bytes);
  } catch (const std::exception& e) {
    why = e.what();
  }
  // Window registration is collective: the ranks agree first, so either all register or none.
  const bool all_allocated = min_over_ranks(why.empty() ? 1 : 0) == 1;
  if (all_allocated) {
    why = comm_->register_window(arenas_[sym].data(), bytes);
    if (why.empty()) return {SymmetricArena::Kind::nccl_window, {}};
    std::fprintf(stderr,
                 "cprr rank %d: symmetric pool is ncclMemAlloc memory without an NCCL window: %s\n",
                 rank_, why.c_str());
    return {SymmetricArena::Kind::nccl_unregistered, why};
  }
  arenas_[sym] = CudaArena(CudaArena::Kind::device, bytes);  // never registered
  if (why.empty()) why = "another rank could not ncclMemAlloc its pool";
  std::fprintf(stderr, "cprr rank %d: symmetric pool is plain device memory: %s\n", rank_,
               why.c_str());
  return {SymmetricArena::Kind::device, why};
}

void CudaBackend::make_window(const SymmetricArena& arena) {
  const int sym = static_cast<int>(MemPool::symmetric);
  std::byte* const base = arenas_[sym].data();
  const uint64_t pool_bytes = capacity_[sym];
  if (world_size_ == 1) {
    // Put and signal reach only this rank's own arena, whatever made it.
    window_ = std::make_unique<CudaWindow>(std::vector<std::byte*>{base}, pool_bytes,
                                           std::vector<IpcMapping>{});
    return;
  }
  std::unique_ptr<CudaWindow> window;
  switch (arena.kind) {
    case SymmetricArena::Kind::nccl_window:
      window = nccl_window(base, pool_bytes);
      break;
    case SymmetricArena::Kind::nccl_unregistered:
      window = std::make_unique<CudaWindow>(fmt::format(
          "the symmetric pool is ncclMemAlloc memory without an NCCL window ({}), which peers "
          "cannot map",
          arena.why));
      break;
    case SymmetricArena::Kind::device:
      // The kind is agreed across ranks, so either every rank all-gathers here or none does.
      window = std::make_unique<CudaWindow>(ipc_window(
          rank_, world_size_, device_, base, pool_bytes,
          [this](const void* mine, std::size_t n) { return all_gather_bytes(mine, n); }));
      break;
  }
  window_ = agree_on_window(std::move(window), pool_bytes);
}

std::unique_ptr<CudaWindow> CudaBackend::nccl_window(std::byte* base, uint64_t pool_bytes) {
  // Not collective: whatever fails here, the caller still reaches the agreement.
  try {
    if (comm_->window() == nullptr) {
      return std::make_unique<CudaWindow>(
          "NCCL registered no window over the symmetric pool (no symmetric memory support on "
          "this communicator)");
    }
    if (const int lsa = comm_->lsa_size(); lsa != world_size_) {
      return std::make_unique<CudaWindow>(fmt::format(
          "NCCL's load/store team holds {} of the {} ranks, so peers' windows are not mapped "
          "here (no P2P path between the GPUs)",
          lsa, world_size_));
    }
    std::vector<std::byte*> bases = nccl_peer_bases(comm_->window(), world_size_, setup_stream_);
    bases[rank_] = base;  // this rank's own stores go through its own pointer
    for (int p = 0; p < world_size_; ++p) {
      if (bases[p] == nullptr) {
        return std::make_unique<CudaWindow>(
            fmt::format("NCCL's window maps no address for rank {}", p));
      }
    }
    return std::make_unique<CudaWindow>(std::move(bases), pool_bytes, std::vector<IpcMapping>{});
  } catch (const Error& e) {
    return std::make_unique<CudaWindow>(e.what());
  }
}

std::unique_ptr<CudaWindow> CudaBackend::agree_on_window(std::unique_ptr<CudaWindow> window,
                                                         uint64_t pool_bytes) {
  // A rank without the window would fail its case at the first put while its peers wait on
  // signals that never come: the world has one-sided ops on every rank or on none. The table's
  // place (after the pool) must also be the same everywhere.
  struct Vote {
    uint64_t pool_bytes;
    uint64_t ok;
  };
  const Vote mine{pool_bytes, window->problem().empty() ? 1u : 0u};
  const std::vector<std::byte> all = all_gather_bytes(&mine, sizeof mine);
  std::string why = window->problem();
  if (!why.empty()) {
    std::fprintf(stderr, "cprr rank %d: no one-sided ops (put/signal) in this world: %s\n", rank_,
                 why.c_str());
  }
  for (int p = 0; p < world_size_ && why.empty(); ++p) {
    Vote theirs;
    std::memcpy(&theirs, all.data() + sizeof theirs * p, sizeof theirs);
    if (theirs.ok == 0) {
      why = fmt::format("rank {} cannot map the one-sided window (its stderr says why)", p);
    } else if (theirs.pool_bytes != pool_bytes) {
      why = fmt::format(
          "rank {}'s symmetric pool has {} bytes, this rank's {}: set CPRR_CUDA_SYMMETRIC_MIB "
          "alike for every rank",
          p, theirs.pool_bytes, pool_bytes);
    }
  }
  if (why.empty() || !window->problem().empty()) return window;  // usable, or holds its own why
  return std::make_unique<CudaWindow>(why);
}

const CudaWindow& CudaBackend::window() {
  ensure_symmetric();
  CPRR_CHECK(window_ != nullptr, "rank {}: one-sided op before the communicator was connected",
             rank_);
  return *window_;
}

std::string CudaBackend::window_problem() const {
  if (comm_ && !window_) return "not made yet";
  return window_ ? window_->problem() : "the communicator is not connected yet";
}

std::string CudaBackend::one_sided_problem() {
  ensure_symmetric();
  return window_problem();
}

std::string CudaBackend::symmetric_pool() const {
  using Kind = SymmetricArena::Kind;
  if (comm_ && !symmetric_made_) return symmetric_.why;
  const std::string why = window_problem();
  const std::string peers = why.empty() ? std::string(world_size_ == 1 ? "" : "; peers mapped")
                                        : "; peers not mapped: " + why;
  switch (symmetric_.kind) {
    case Kind::nccl_window:
      return "NCCL window (ncclMemAlloc, ncclCommWindowRegister NCCL_WIN_COLL_SYMMETRIC)" + peers;
    case Kind::nccl_unregistered:
      return "ncclMemAlloc memory, no NCCL window: " + symmetric_.why + peers;
    case Kind::device:
      return "plain device memory, no NCCL window: " + symmetric_.why + peers;
  }
  return "?";
}

void CudaBackend::put(int stream, int peer, uint64_t offset, const void* src, std::size_t bytes) {
  std::byte* dst = window().pool_at(peer, offset, bytes);
  // A copy into the peer's memory as this process maps it (NCCL's window or CUDA IPC); the
  // signal that follows on the stream starts only once it finished.
  CPRR_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, at(stream).handle));
  note_launch(stream, fmt::format("put {} bytes to rank {} at symmetric +{}", bytes, peer, offset));
}

void CudaBackend::signal(int stream, int peer, uint32_t slot, uint64_t value) {
  launch_signal(window().slot_at(peer, slot), value, at(stream).handle);
  note_launch(stream, fmt::format("signal rank {} slot {} = {:#x}", peer, slot, value));
}

void CudaBackend::wait_signal(int stream, uint32_t slot, uint64_t value) {
  launch_wait_signal(window().slot_at(rank_, slot), value, at(stream).handle);
  note_launch(stream, fmt::format("wait_signal slot {} >= {:#x}", slot, value));
}

}  // namespace cprr

#pragma once
// The CUDA/NCCL backend: rank r uses visible device r mod G of the G visible GPUs (its local rank
// under a launcher; CUDA_VISIBLE_DEVICES picks and orders them), arenas from cudaMalloc (device),
// cudaMallocHost (pinned host) and ncclMemAlloc registered as an NCCL symmetric window (plain
// cudaMalloc, with the reason on stderr, where windows are not supported), CUDA streams and events,
// a non-blocking NCCL communicator bootstrapped through the controller (or, where ranks share a
// GPU, Gloo staged through pinned host memory: runtime/cuda_staged.h), and one-sided put/signal
// into the peers' symmetric pools (runtime/cuda_window.h).
//
// A fresh world pays only for what its case uses. With NCCL, connecting starts the communicator
// and returns: NCCL joins in its own thread while the rank goes on, and the first use waits
// for it. The symmetric arena and its window (collective: ncclMemAlloc agreement, window
// registration, the peers' mapping) are made at the first use of the symmetric pool or of a
// one-sided op, or before the first world collective, split or native_comm(), whichever comes
// first: every rank's calls on the communicator then begin with them, whatever its case calls
// first (a point-to-point message alone makes nothing: ranks outside it would never come). The
// pinned host arena waits for its first use too; the device arena for the first case. Arena sizes
// come from CPRR_CUDA_DEVICE_MIB, CPRR_CUDA_SYMMETRIC_MIB and CPRR_CUDA_HOST_MIB (recorded with the
// run like every CPRR_*); the device arena's default is 8 GiB divided among the ranks that share a
// GPU (device_arena_mib).
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cuda_nccl.h"
#include "runtime/cuda_staged.h"
#include "runtime/cuda_window.h"

namespace cprr {

/// Usable CUDA devices; 0 with `why` set when there is no driver or no device ("no GPU", not an
/// error: that is how the development machine and CI look).
int cuda_device_count(std::string* why);

/// CUDA runtime and driver, NCCL (as loaded), GPU model and count; empty without a GPU.
std::vector<std::pair<std::string, std::string>> cuda_versions();
/// The visible GPUs' UUIDs in device order ("GPU-8f2a...", as CUDA_VISIBLE_DEVICES takes them),
/// the index where a GPU's properties cannot be read.
std::vector<std::string> cuda_gpu_uuids();

/// One arena: RAII over whichever allocator made it.
class CudaArena {
 public:
  enum class Kind { none, device, host, nccl };
  CudaArena() = default;
  /// Allocates and zeroes (as the CPU backend's mmap does), the zeroes in place on return.
  CudaArena(Kind kind, uint64_t bytes);
  ~CudaArena();
  CudaArena(CudaArena&& o) noexcept { *this = std::move(o); }
  CudaArena& operator=(CudaArena&& o) noexcept;
  std::byte* data() const { return data_; }

 private:
  /// The host arena from transparent huge pages, zeroed, then pinned (cudaHostRegister):
  /// pinning touches and locks every page, and 2 MiB pages cut a 256 MiB arena's share of a
  /// world's start from ~140 ms (cudaMallocHost) to ~55 ms on an H100. False (nothing held)
  /// where the kernel has no huge pages or the device cannot use registered memory through its
  /// host addresses: cudaMallocHost then.
  bool map_huge_pinned(uint64_t bytes);

  Kind kind_ = Kind::none;
  std::byte* data_ = nullptr;
  void* map_ = nullptr;  ///< the mapping map_huge_pinned made (data_ lies in it), else nullptr
  std::size_t map_bytes_ = 0;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendConfig& config);
  ~CudaBackend() override;

  std::string_view name() const override { return backend_name(BackendKind::cuda); }
  /// Allocates (and zeroes) the device arena on the first call, not at start: a standby world
  /// waiting for its case then holds its CUDA context, communicator and symmetric arena on the
  /// GPU, but not the device arena (8 GiB by default), so --standby N costs N contexts, not N
  /// arenas. A pooled world allocates it at its first case too, so fresh and pooled worlds
  /// still allocate the same way. Collective once the communicator is connected (the ranks
  /// agree on the outcome, so one rank's failure fails them all): every rank calls it at the
  /// same case, as CaseRunner::reset does; never concurrently with other calls on the backend.
  void prepare_arenas() override;
  std::byte* arena_base(MemPool pool) override;
  uint64_t arena_capacity(MemPool pool) const override;
  int stream(int index, std::string_view name) override;
  void enqueue_host(int stream, std::string label, std::function<void()> fn) override;
  void copy_async(int stream, void* dst, const void* src, std::size_t bytes) override;
  void collective(int stream, CollectiveCall call) override;
  int create_event() override;
  void record_event(int event, int stream) override;
  void wait_event(int stream, int event) override;
  void release_events() override { events_used_ = 0; }
  void synchronize(int stream) override;
  void synchronize_all() override;
  CollectiveProgress collective_progress() const override;
  std::vector<std::string> running_ops() const override;
  void reset_collective_progress() override;
  CollectiveTransport transport() const override {
    return staged_ ? CollectiveTransport::gloo_staged : CollectiveTransport::nccl;
  }
  /// NCCL: an all-gather on a stream of its own (runtime/cuda_backend_groups.cpp), so a split
  /// waits for no stream of the case; staged: Gloo on the host.
  std::vector<SplitVote> split_votes(SplitVote mine, uint32_t tag) override;
  /// NCCL: ncclCommSplit of the world's communicator; staged: a Gloo context of the members,
  /// staged as the world's.
  void make_group(uint32_t group, SplitVote mine, const std::vector<int>& members) override;
  void end_groups(bool clean) override;
  void close_ended_groups() override;

  std::string bootstrap_id() override;
  void connect(const ConnectSpec& spec) override;
  int device_index() const override { return device_; }
  std::string device_identity() const override;
  void abort() override;
  bool device_kernels() const override { return true; }
  bool teardown_left_to_exit() const override { return true; }
  void* native_stream(int stream) override;
  void follow_native(int stream, void* native) override;
  void lead_native(void* native, int stream) override;
  void delay_native(void* native, uint32_t us) override;
  void order_natives(void* waiter, void* recorded) override;
  void synchronize_device() override;
  bool read_memory(void* dst, const void* src, std::size_t bytes) override;
  /// The NCCL communicator, joined, after the world set-up (collective, see the file's
  /// comment); nullptr where the collectives go through Gloo (ranks share a GPU).
  void* native_comm() override;
  bool has_native_comm() const override { return comm_ != nullptr; }
  /// A collective: the symmetric set-up (and the communicator); a message: the communicator.
  void before_communication(bool collective) override;
  /// Lets a communicator still joining finish (5 s at most): a rank that exited while NCCL
  /// was joining left the driver holding ~0.5 GB of GPU memory past its exit (H200).
  void settle_before_exit() override;
  void note_launch(int stream, std::string label) override;
  std::string broken() const override;

  std::string one_sided_problem() override;
  std::string symmetric_pool() const override;
  void put(int stream, int peer, uint64_t offset, const void* src, std::size_t bytes) override;
  void signal(int stream, int peer, uint32_t slot, uint64_t value) override;
  void wait_signal(int stream, uint32_t slot, uint64_t value) override;
  void delay(int stream, uint32_t us) override;
  void begin_marks() override;
  void mark(int stream) override;
  std::vector<int64_t> marks() override;
  std::vector<StartupPhase> take_startup_phases() override { return startup_.take(); }
  std::vector<StartupPhase> take_first_use_phases() override;

 private:
  struct StreamSlot {
    cudaStream_t handle = nullptr;
    std::string name;
    std::string last_op;  // guarded by mu_
  };
  /// A collective in flight: events before and after it tell the watchdog how far it got.
  struct Pending {
    uint64_t seq;
    std::string kind;
    cudaEvent_t before;
    cudaEvent_t after;
  };

  StreamSlot& at(int stream);
  /// The NCCL communicator, waited for on first use (the wait a first-use phase).
  NcclComm& joined_comm();
  /// Makes the symmetric arena and window once (collective; see the file's comment).
  void ensure_symmetric();
  /// Times `fn` as the first-use phase `name`.
  template <class Fn>
  void first_use(const char* name, Fn&& fn);
  cudaEvent_t take_event();  // with mu_ held
  void wait_stream(int stream);
  void poll_stream(int stream);
  /// Polls `h` until it drained, throwing on an NCCL error or an abort of any communicator.
  void poll_handle(cudaStream_t h);
  /// Throws when a group's communicator reported an error or was aborted.
  void check_groups() const;
  /// Issues a group's collective (call.group != 0) on its communicator.
  void issue_on_group(int stream, cudaStream_t s, const CollectiveCall& call);
  void rethrow_host_error();
  /// The minimum of `value` over all ranks (collective; used while connecting).
  int min_over_ranks(int value);
  /// Every rank's `bytes` bytes, rank r's at r * bytes (collective; used while connecting).
  std::vector<std::byte> all_gather_bytes(const void* mine, std::size_t bytes);
  /// What the symmetric arena is made of, which decides how peers can map it.
  struct SymmetricArena {
    enum class Kind { nccl_window, nccl_unregistered, device } kind;
    std::string why;  ///< why it is not an NCCL window (empty for nccl_window)
  };
  /// ncclMemAlloc + window registration, agreed across ranks, or plain memory with a reason;
  /// either way the arena ends in the semaphore table (kSemaphoreTableReserve).
  SymmetricArena make_symmetric_pool();
  /// The one-sided window over every rank's symmetric arena, agreed across ranks (collective).
  void make_window(const SymmetricArena& arena);
  SymmetricArena symmetric_{SymmetricArena::Kind::device, "the communicator is not connected yet"};
  /// The window through NCCL's mapping of the registered arena `base` (not collective), or one
  /// saying why there is none.
  std::unique_ptr<CudaWindow> nccl_window(std::byte* base, uint64_t pool_bytes);
  /// `window` if every rank has one over pools of the same size, else one saying which rank
  /// cannot (collective).
  std::unique_ptr<CudaWindow> agree_on_window(std::unique_ptr<CudaWindow> window,
                                              uint64_t pool_bytes);
  /// Issues a collective through Gloo (staged_), a symmetric all-reduce as NCCL's symmetric
  /// kernels compute it when the buffer lies in the symmetric pool and peers are mapped.
  void issue_staged(int stream, cudaStream_t s, const CollectiveCall& call);
  /// The window, made if it was not yet (ensure_symmetric); throws (cprr::Error) before the
  /// communicator is connected.
  const CudaWindow& window();
  /// Why put/signal cannot work, without making anything.
  std::string window_problem() const;
  /// Runs `fn`; an exception from it marks the backend broken (first reason kept) and propagates.
  template <class Fn>
  void guarded(Fn&& fn);
  static void run_host_fn(void* arg);

  int rank_ = 0;
  int world_size_ = 1;
  int device_ = 0;
  std::string rendezvous_;  ///< the world's directory: Gloo's FileStore when ranks share a GPU
  /// The NCCL id is made only where NCCL may be the transport (see bootstrap_id).
  bool nccl_possible_ = true;
  std::array<uint64_t, 3> capacity_{};
  std::array<CudaArena, 3> arenas_;
  std::mutex host_arena_mu_;  // the pinned host arena's first use (arena_base) may be any thread's
  std::unique_ptr<NcclComm> comm_;             // NCCL transport, or
  std::unique_ptr<StagedCollectives> staged_;  // Gloo staged through host memory
  std::unique_ptr<CudaWindow> window_;         // set while connecting, then read-only
  void* barrier_scratch_ = nullptr;
  /// The stream of cprr's own collectives (agreements while setting up, split votes): none of
  /// the case's streams, so set-up in the middle of a case waits for none of its work.
  cudaStream_t setup_stream_ = nullptr;
  /// Serializes first uses (ensure_symmetric, joined_comm) and holds their phases.
  std::mutex setup_mu_;
  std::atomic<bool> symmetric_made_{false};
  PhaseClock first_use_;  // times one first-use step at a time (first_use())
  /// Splits (runtime/cuda_backend_groups.cpp): the votes' device buffer, made at the first
  /// split; the groups of this case (guarded by mu_: abort() ends them too).
  void* split_scratch_ = nullptr;
  uint64_t splits_ = 0;
  std::map<uint32_t, std::unique_ptr<NcclComm>> nccl_groups_;
  std::map<uint32_t, std::unique_ptr<StagedCollectives>> staged_groups_;
  /// The last case's groups, until close_ended_groups; `ended_clean_`: end_groups' `clean`.
  std::vector<std::unique_ptr<NcclComm>> ended_nccl_;
  std::vector<std::unique_ptr<StagedCollectives>> ended_staged_;
  bool ended_clean_ = true;
  mutable std::mutex mu_;  // streams_, last_op, pending_, progress_, host_error_
  std::vector<StreamSlot> streams_;
  std::vector<cudaEvent_t> events_;  // case events (Context::record), reused across cases
  std::size_t events_used_ = 0;
  /// Timeline marks: timing events reused across cases, the first `marks_used_` this case's;
  /// `mark_origin_` completed at steady-clock time `mark_origin_ns_`.
  std::vector<cudaEvent_t> mark_events_;
  std::size_t marks_used_ = 0;
  cudaEvent_t mark_origin_ = nullptr;
  int64_t mark_origin_ns_ = 0;
  mutable std::vector<Pending> pending_;
  mutable std::vector<cudaEvent_t> spare_events_;
  mutable CollectiveProgress progress_;
  std::exception_ptr host_error_;
  std::string broken_;  // guarded by mu_
  PhaseClock startup_;  // used by the rank's main thread only, while it starts
};

template <class Fn>
void CudaBackend::guarded(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    if (broken_.empty()) broken_ = e.what();
    throw;
  }
}

}  // namespace cprr

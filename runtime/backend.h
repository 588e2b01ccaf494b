#pragma once
// The seam between the Case API and a device runtime. The CPU backend (cpu_backend.h) is what CI
// runs; the CUDA/NCCL backend implements the same interface. Streams and events are small
// integer ids so the op log can name them; stream 0 is the default stream.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/backend_kind.h"
#include "runtime/dtype.h"
#include "runtime/startup_phases.h"
#include "runtime/transport.h"

namespace cprr {

/// Memory pools the tracked allocator carves; each is one arena per rank process.
enum class MemPool : uint8_t { device, symmetric, host };
std::string_view mem_pool_name(MemPool p);

/// Collective progress as seen by a rank, for hang diagnosis (read from the watchdog thread).
struct CollectiveProgress {
  int64_t entered_seq = -1;
  std::string entered_kind;
  int64_t completed_seq = -1;
  std::string completed_kind;
};

/// One collective call; counts are elements of dtype. `seq` is the per-communicator sequence
/// number (also used as the transport tag).
struct CollectiveCall {
  /// The group it runs on (Backend::make_group's id; 0: the world). `root`, the counts' order
  /// and a message's peer are ranks of that group.
  uint32_t group = 0;
  /// all_reduce | all_gather | all_to_all_v | broadcast | barrier | send | recv (`root`: the
  /// peer; `seq`: the message's number to or from it, the tag the two sides match on)
  std::string kind;
  uint64_t seq = 0;
  DType dtype = DType::u8;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  const void* in = nullptr;
  void* out = nullptr;
  std::size_t count = 0;
  std::vector<int64_t> send_counts;
  std::vector<int64_t> recv_counts;
};

/// One rank's part in a split of the world (Context::split): ranks that pass one color (>= 0) form
/// a group, ordered by key, then by world rank; a negative color joins none.
struct SplitVote {
  int32_t color = -1;
  int32_t key = 0;
};

/// The groups a split makes from every rank's vote (index = world rank): one per color voted,
/// colors ascending, each its world ranks in group-rank order (ncclCommSplit's order).
std::vector<std::pair<int32_t, std::vector<int>>> split_groups(const std::vector<SplitVote>& votes);

/// Where world rank `rank` stands in a group's `members` (world ranks in group-rank order); -1
/// when `members` is empty (no group). Throws cprr::Error when the rank is not among them.
int group_rank(const std::vector<int>& members, int rank);

/// Semaphores a case may use for one-sided signalling (Context::signal). A rank's semaphore table
/// has kMaxSemaphores * world_size slots: slot sem * world_size + src is written only by rank src.
inline constexpr uint32_t kMaxSemaphores = 64;

/// What a rank joins its world's communicator with (the controller's Bootstrap).
struct ConnectSpec {
  std::string comm_id;  ///< rank 0's bootstrap_id()
  CollectiveTransport transport = CollectiveTransport::nccl;
};

/// A rank's device runtime. Lives for the whole rank process (across pooled cases).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  /// Called before every case (CaseRunner::reset; a throw is that case's error): makes the
  /// arenas cases allocate from exist, where a backend defers them from start-up to the first
  /// case (CUDA's device arena). A no-op once they exist.
  virtual void prepare_arenas() {}
  /// Base address and size of the arena of `pool` (reserved once; contents persist across cases).
  virtual std::byte* arena_base(MemPool pool) = 0;
  virtual uint64_t arena_capacity(MemPool pool) const = 0;

  /// The stream with creation index `index` (0 = default), created on first use. Streams are
  /// reused across pooled cases, as a framework's stream pool would.
  virtual int stream(int index, std::string_view name) = 0;

  /// Runs `fn` on the host in stream order (CPU: on the stream thread). Kernel launches of the
  /// CPU backend and probe/output hashing go through here.
  virtual void enqueue_host(int stream, std::string label, std::function<void()> fn) = 0;
  /// Asynchronous copy in stream order; on CPU it runs when the stream reaches it.
  virtual void copy_async(int stream, void* dst, const void* src, std::size_t bytes) = 0;
  /// Issues a collective in stream order.
  virtual void collective(int stream, CollectiveCall call) = 0;

  /// Events: record captures the stream's current position; wait orders a stream after it.
  virtual int create_event() = 0;
  virtual void record_event(int event, int stream) = 0;
  virtual void wait_event(int stream, int event) = 0;
  virtual void release_events() = 0;  ///< end of case: event ids restart

  /// Host waits for a stream / all streams; rethrows the first error an op raised.
  virtual void synchronize(int stream) = 0;
  virtual void synchronize_all() = 0;

  /// Watchdog views (thread-safe).
  virtual CollectiveProgress collective_progress() const = 0;
  virtual std::vector<std::string> running_ops() const = 0;
  /// Start of a case: collective sequence numbers restart at 0 on every rank.
  virtual void reset_collective_progress() = 0;

  // ---- groups: a split of the world (Context::split), ended with the case ----
  /// How this world's collectives travel (a group's travel the same way).
  virtual CollectiveTransport transport() const { return CollectiveTransport::gloo; }
  /// Split, part 1: every rank's vote (index = world rank). Collective over the world, on the
  /// host; `tag` is the split's number among the world's collectives, apart from every other.
  virtual std::vector<SplitVote> split_votes(SplitVote mine, uint32_t tag);
  /// Split, part 2: this rank's group of the split gets its communicator under id `group`
  /// (`members`: its world ranks in group-rank order; empty where this rank voted no color).
  /// Every rank of the world calls it, members or not (NCCL's ncclCommSplit is collective).
  virtual void make_group(uint32_t group, SplitVote mine, const std::vector<int>& members);
  /// End of a case on this rank (its streams drained): its groups take no more calls. Their
  /// communicators close at close_ended_groups, not here: a peer may still wait in a group
  /// collective this rank skipped, and closing would end that wait with an error (Gloo: the
  /// connection closed) instead of the hang it is. `clean`: every op of this rank completed, so
  /// the communicators are finalized; otherwise aborted, waiting for no peer.
  virtual void end_groups(bool clean) {}
  /// Start of a case (every rank finished the last one, or the world would have been replaced):
  /// the communicators of the groups end_groups ended close.
  virtual void close_ended_groups() {}

  // ---- communicator bootstrap through the controller (CUDA: NCCL's unique id) ----
  /// What this rank puts in its hello: rank 0's communicator id, empty elsewhere and on backends
  /// that rendezvous on their own (CPU: Gloo's FileStore).
  virtual std::string bootstrap_id() { return {}; }
  /// Joins the communicator with rank 0's id, which the controller hands to every rank, over
  /// the transport the controller chose from every rank's device_identity() (CUDA: NCCL when
  /// every rank has a GPU of its own, else Gloo staged through host memory).
  virtual void connect(const ConnectSpec& spec) {}
  /// The GPU this rank runs on (its index among the visible ones), -1 without one.
  virtual int device_index() const { return -1; }
  /// What tells this rank's device apart from every other of the world: "host/GPU-uuid" on
  /// CUDA (ranks with the same identity share a GPU), the host on the CPU backend (whose ranks
  /// must share one).
  virtual std::string device_identity() const { return {}; }
  /// Called from the watchdog thread when the controller gives up on a hung case: ends stuck
  /// collectives (ncclCommAbort) so the rank can exit; the rank process is not reused after it.
  virtual void abort() {}
  /// True when a rank told to shut down may exit at once, leaving its device state to the
  /// process's exit: tearing it down first frees nothing the exit does not (the kernel and the
  /// driver reclaim the memory, the contexts and the peers' mappings). A rank reads Shutdown
  /// only between its cases: the controller's, ending the world, or its channel's own when the
  /// controller is gone. CUDA: NCCL's finalize and destroy were ~0.5 s of every world's shutdown.
  virtual bool teardown_left_to_exit() const { return false; }
  /// The steps of this backend's start-up timed since the last call (the constructor's, then
  /// connect()'s), handed over: the rank reports them in its Hello and Connected.
  virtual std::vector<StartupPhase> take_startup_phases() { return {}; }
  /// Start-up the backend left to its first use, paid inside a case since the last call
  /// (CUDA: the wait for the NCCL communicator, the symmetric arena and window), handed over:
  /// the rank reports them with the case.
  virtual std::vector<StartupPhase> take_first_use_phases() { return {}; }

  // ---- device execution ----
  /// True when kernels run on a device: Context::launch then launches the functor as a grid on
  /// native_stream() instead of calling it on the host.
  virtual bool device_kernels() const { return false; }
  /// The native stream handle (cudaStream_t) of `stream`, or nullptr on the CPU backend.
  virtual void* native_stream(int stream) { return nullptr; }
  /// The native communicator (ncclComm_t), or nullptr on the CPU backend. Collective where the
  /// backend makes its world set-up at first use: every rank asks at the same point.
  virtual void* native_comm() { return nullptr; }
  /// Whether native_comm() would return a communicator (a query: it sets nothing up).
  virtual bool has_native_comm() const { return false; }
  /// Called before a collective (`collective`) or a message is logged, so before any delay a
  /// replay puts ahead of it: a backend that makes its communicator or symmetric pool at first
  /// use waits for them here, never between the delay and the op it delays.
  virtual void before_communication(bool collective) {}
  /// Called before the rank exits without tearing down (teardown_left_to_exit): lets work the
  /// backend started in the background settle, so the exit frees what it holds (bounded).
  virtual void settle_before_exit() {}
  /// Orders work across a stream the backend does not own (`native`, a cudaStream_t of the case's
  /// own library; nullptr: the legacy default stream): `stream` waits for what `native` enqueued
  /// so far (follow_native), or `native`'s later work waits for what `stream` enqueued so far
  /// (lead_native). No-ops where kernels do not run on a device.
  virtual void follow_native(int stream, void* native) {}
  virtual void lead_native(void* native, int stream) {}
  /// `waiter`'s later work waits for what `recorded` enqueued so far (both the library's
  /// cudaStream_t). Any thread. No-op where kernels do not run on a device.
  virtual void order_natives(void* waiter, void* recorded) {}
  /// In `native`'s order (a cudaStream_t of the case's library): it idles for `us` microseconds
  /// (a replay's race amplification of a library op). No-op where kernels do not run on a device.
  virtual void delay_native(void* native, uint32_t us) {}
  /// The host waits for everything the device runs, the backend's streams and the library's:
  /// where kernels do not run on a device, synchronize_all().
  virtual void synchronize_device() { synchronize_all(); }
  /// Copies `bytes` at `src` (host memory, or the device's: a tensor's, an arena's) into host
  /// memory `dst` now, after synchronize_device (a probe replay's view of what an op changed).
  /// False, with nothing thrown, where `src` is no longer readable (a freed tensor's memory
  /// handed back to the system): the caller gives up on it. Host memory is read through
  /// process_vm_readv, which fails on an unmapped page instead of faulting.
  virtual bool read_memory(void* dst, const void* src, std::size_t bytes);
  /// Notes a device op launched outside the backend (a kernel) on `stream`, for running_ops().
  virtual void note_launch(int stream, std::string label) {}
  /// Empty while the device state is usable; otherwise why not (a sticky CUDA error, an NCCL
  /// error, an abort). The case's result is then an error, so its world is replaced rather than
  /// handing the broken state to the next case.
  virtual std::string broken() const { return {}; }

  // ---- one-sided: every rank's symmetric pool is a window its peers can write ----
  /// Empty when put/signal/wait_signal work; otherwise why not (the Case API's error says it).
  /// A first use of the symmetric pool: where the backend makes it then, collective.
  virtual std::string one_sided_problem() { return "this backend has no symmetric window"; }
  /// One line on what the symmetric pool is: what makes its collectives symmetric (CUDA: an
  /// NCCL window registered with NCCL_WIN_COLL_SYMMETRIC) or why it is not, or that it is not
  /// made yet (CUDA with NCCL makes it at its first use). The rank reports it after connecting
  /// and with every case; the controller records it with every execution.
  virtual std::string symmetric_pool() const { return "no symmetric window"; }
  /// In stream order: copies `bytes` from `src` (this rank's memory) to byte `offset` of `peer`'s
  /// symmetric pool. Nothing orders it with the peer's own ops: signal/wait_signal do.
  virtual void put(int stream, int peer, uint64_t offset, const void* src, std::size_t bytes);
  /// In stream order: sets slot `slot` of `peer`'s semaphore table to `value`, once everything
  /// the stream did before (puts included) is visible to the peer.
  virtual void signal(int stream, int peer, uint32_t slot, uint64_t value);
  /// In stream order: the stream waits until this rank's slot `slot` holds at least `value`.
  virtual void wait_signal(int stream, uint32_t slot, uint64_t value);
  /// In stream order: the stream idles for `us` microseconds (a replay's race amplification).
  virtual void delay(int stream, uint32_t us);

  // ---- timeline marks (only when a trace is asked for: cprecord/cpreplay --trace) ----
  /// Starts a case's marks (the previous case's are dropped).
  virtual void begin_marks();
  /// In stream order: notes when `stream` reaches this point (CPU: the stream thread's clock;
  /// CUDA: an event), as the next mark.
  virtual void mark(int stream);
  /// After synchronize_all: when each mark since begin_marks() was reached, in mark() order, as
  /// nanoseconds of the steady clock (system-wide on Linux, so ranks on one host line up); -1
  /// for a mark never reached (the stream failed before it).
  virtual std::vector<int64_t> marks();
};

/// The steady clock's now in nanoseconds: what Backend::marks() and host-side marks are in.
int64_t steady_now_ns();

/// Options for creating a backend in a rank process.
struct BackendConfig {
  BackendKind kind = BackendKind::cpu;
  int rank = 0;
  int world_size = 1;
  std::string rendezvous;  ///< CPU: FileStore directory made by the controller
  /// The rank's index among the ranks of its host (CUDA: the GPU it takes); -1: its rank, as
  /// when every rank runs on one host. A launcher across hosts sets it (CPRR_LOCAL_RANK).
  int local_rank = -1;
  /// Ranks of this world on the rank's host (CUDA: how many share a GPU, which sizes the device
  /// arena); -1: world_size, as when every rank runs on one host. A launcher sets it
  /// (CPRR_LOCAL_SIZE).
  int local_size = -1;
};

/// Calls wait_one(i) for every stream i in [0, n) and only then rethrows the first error, so no
/// op still runs when the caller goes on to free buffers (synchronize_all of every backend).
void wait_each_stream(std::size_t n, const std::function<void(int)>& wait_one);

/// Creates the backend named by config.kind; throws UsageError for an unknown or unbuilt one.
std::unique_ptr<Backend> make_backend(const BackendConfig& config);

/// GPUs this process can use: 0 without the CUDA backend in this build, without a driver or
/// without devices; then `why` (if given) says which.
int visible_gpus(std::string* why = nullptr);

/// The visible GPUs' names for CUDA_VISIBLE_DEVICES, in device order: their UUIDs
/// ("GPU-8f2a..."); empty without the CUDA backend or without a GPU.
std::vector<std::string> gpu_uuids();

/// Versions a cuda run is recorded with (CUDA runtime and driver, NCCL, GPU model and count);
/// empty without the CUDA backend or without a GPU.
std::vector<std::pair<std::string, std::string>> device_versions();

/// Resolves --backend: "auto" is cuda when this build has the CUDA backend and a GPU is visible,
/// else cpu; "cuda" without either throws UsageError saying what is missing, and any other word
/// UsageError naming the option and its words.
BackendKind resolve_backend(std::string_view requested);

}  // namespace cprr

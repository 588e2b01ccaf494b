#pragma once
// The Case API: what a case body receives. Every memory, stream and collective action goes
// through the Context, so the allocation, op and collective logs are complete by construction.
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "data/capture.h"
#include "data/case_info.h"
#include "data/flight_record.h"
#include "data/perturbation.h"
#include "kernels/device_launch.h"
#include "kernels/rng.h"
#include "recorder/api/capture_hasher.h"
#include "recorder/api/library_memory.h"
#include "runtime/backend.h"
#include "runtime/error.h"
#include "runtime/placement.h"

namespace cprr {

/// The bytes a probe replay copies around one op at most (Perturbation::probe_touches): an op
/// handed more stays unprobed, of unknown direction.
inline constexpr uint64_t kMaxProbeBytes = uint64_t{256} << 20;

/// A tracked allocation (or a byte range of one, see slice()). Plain value; the Context owns
/// the memory. On the CPU backend every pool is host memory; on CUDA only MemPool::host is
/// host-accessible, so case code touches device buffers only through kernels and copies.
struct Buffer {
  uint32_t id = 0;
  std::byte* ptr = nullptr;
  uint64_t bytes = 0;
  MemPool pool = MemPool::device;

  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(ptr);
  }
  template <class T>
  uint64_t count() const {
    return bytes / sizeof(T);
  }
  /// A sub-range [offset, offset + len) of this buffer; same id, so logs name the allocation.
  Buffer slice(uint64_t offset, uint64_t len) const;
};

/// A stream handle (0 = default stream).
struct Stream {
  int id = 0;
};

/// An event handle, valid for the current case.
struct Event {
  int id = -1;
};

/// A semaphore for one-sided signalling: a number in [0, kMaxSemaphores) the ranks agree on.
/// Each ordered pair of ranks has its own counter per semaphore; counters start at 0 every case.
struct Semaphore {
  uint32_t id = 0;
};

/// Declared accesses of an op; they become the op log's read and write sets.
struct Access {
  std::vector<Buffer> reads;
  std::vector<Buffer> writes;
  /// Buffers the op is handed without knowing how it uses them (an opaque library call given
  /// their pointers): accesses of unknown direction (OpRecord::touches). A race through one is a
  /// candidate, confirmed or dropped by cpreplay's replays; declare reads and writes to be exact.
  std::vector<Buffer> uses;
};

/// Collective progress of calls a case makes through its own library (torch.distributed in a
/// Python case) rather than the backend: what the watchdog reports while one is stuck. Written by
/// the case body's thread, read by the watchdog's.
class ForeignProgress {
 public:
  void reset();
  void enter(uint64_t seq, const std::string& kind);
  void complete(uint64_t seq, const std::string& kind);
  /// nullopt when no such call was made this case (the backend's progress is the one to report).
  std::optional<CollectiveProgress> get() const;

 private:
  mutable std::mutex mu_;
  std::optional<CollectiveProgress> progress_;
};

/// Per-process state that outlives cases: the backend and the allocator arenas. Pool mode keeps
/// it across cases (that is what the fresh-vs-pooled differential probes); fresh mode has one
/// case per process.
struct RankState {
  int rank = 0;
  int world_size = 1;
  std::unique_ptr<Backend> backend;
  std::array<std::unique_ptr<PlacementEngine>, 3> engines;  // indexed by MemPool
  std::unique_ptr<CaptureHasher> hasher;  ///< made on first use, for the backend above
  /// False when the worker runs with CPRR_CAPTURE=off: probes and outputs are logged but not
  /// hashed. Only for measuring what recording costs (tools/bench); replay needs the hashes.
  bool capture = true;
  /// Where the rank records each collective before entering it (data/flight_record.h),
  /// so a call that then aborts or hangs is still known; null when nobody reads it (tests).
  std::unique_ptr<FlightRecorder> flight;
  /// Behind a pointer: its mutex does not move, and RankState does.
  std::unique_ptr<ForeignProgress> foreign = std::make_unique<ForeignProgress>();
  /// Why the world's transport may be broken since a call into it raised
  /// (LibraryHooks::distrust_transport); the worker hands it over with the case's result.
  std::string distrusted;
  /// The case's library's memory from the device arena (LibraryHooks::library_memory), made on
  /// first use. Last: it goes first, before the backend and engines it uses.
  std::unique_ptr<LibraryMemory> library;
};

class LibraryHooks;
class LiveMemory;
class LibraryGraphs;
class Context;

/// Ranks of the world that run collectives and messages among themselves: the world itself
/// (Context::world) or a group of a split (Context::split). Its ranks are its own, 0..size()-1 in
/// the order the split gave them; roots and peers are such ranks, and the logs name the world's.
/// Each group numbers its collectives, and each (sender, receiver) pair in it its messages, on
/// their own: cprr matches them across the group's ranks and checks them like the world's. A
/// plain value, valid for the case that made it.
class Group {
 public:
  /// 0 for the world; a split's groups get the case's next ids (one per color, ascending), the
  /// same on every rank.
  uint32_t id() const { return id_; }
  /// False on a rank that split with a negative color: it is in no group of that split (its
  /// id() is 0 and its size() 0), and every call on this value throws.
  bool member() const { return rank_ >= 0; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  /// The world rank of group rank `r`; throws CaseFailure when it is not one.
  int world_rank(int r) const;
  /// Its world ranks in group-rank order.
  const std::vector<int>& world_ranks() const { return ranks_; }

  // The Context's collectives and messages, on this group's communicator (see there).
  void all_reduce(Stream s, const Buffer& buf, DType dtype, ReduceOp op = ReduceOp::sum) const;
  /// `out` holds size() * in.bytes.
  void all_gather(Stream s, const Buffer& in, const Buffer& out, DType dtype) const;
  /// Counts are elements per group rank, packed in group-rank order.
  void all_to_all_v(Stream s, const Buffer& in, std::vector<int64_t> send_counts, const Buffer& out,
                    std::vector<int64_t> recv_counts, DType dtype) const;
  void broadcast(Stream s, const Buffer& buf, DType dtype, int root) const;
  void barrier(Stream s) const;
  void send(Stream s, int peer, const Buffer& buf, DType dtype) const;
  void recv(Stream s, int peer, const Buffer& buf, DType dtype) const;

 private:
  friend class Context;
  /// The Context, once this rank is a member; else throws CaseFailure naming `what`.
  Context& context(const char* what) const;
  /// The group's world ranks as a bitmask (CollectiveRecord::members); 0 for the world and for
  /// worlds over 64 ranks.
  uint64_t members_mask() const;
  /// Checks `peer` (a group rank other than this one) for a send or recv.
  void check_peer(const char* kind, int peer) const;

  Context* ctx_ = nullptr;
  uint32_t id_ = 0;
  std::vector<int> ranks_;
  int rank_ = -1;
  std::string split_;  ///< "split #2 (color -1)": what made a non-member, for its error
};

/// What a case body is given. Not thread-safe: call it from the case body's thread.
class Context {
 public:
  /// `execution` is the controller's id for this execution (the same on every rank, increasing
  /// over a world's life): it keeps one case's semaphore values apart from an earlier case's.
  /// `perturbation` is what a replay changes to confirm a race (data/perturbation.h).
  /// `timeline`: time every op and allocation (CaseCapture::timeline) for a trace.
  Context(RankState& state, std::string case_name, Params params, uint64_t seed,
          Placement placement, uint64_t execution = 0, Perturbation perturbation = {},
          bool timeline = false);
  /// A Context dropped without finish() (a test, an embedder) still drains its streams and makes
  /// the hasher forget its captures, so nothing later writes into freed slots.
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const { return state_.rank; }
  int world_size() const { return state_.world_size; }
  uint64_t seed() const { return seed_; }
  /// The controller's id for this execution: the same on every rank, increasing.
  uint64_t execution() const { return execution_; }
  const std::string& case_name() const { return name_; }
  const Params& params() const { return params_; }
  /// The value of parameter `key`; throws CaseFailure naming the key when absent.
  const std::string& param(std::string_view key) const;
  /// param() parsed as an integer; throws CaseFailure when it is not one.
  int64_t param_int(std::string_view key) const;
  /// The harness RNG, reseeded from the case seed and rank at every case start.
  Rng& rng() { return rng_; }
  /// Skips the case on this rank (throws CaseSkipped): its status is `skip` with `reason` when
  /// every rank skips; a rank that skips alone fails the execution, named (the others ran it).
  [[noreturn]] void skip(const std::string& reason) { throw CaseSkipped(reason); }

  // ---- memory ----
  /// Allocates `bytes` from `pool` with the case's placement policy; logged with the stream.
  Buffer alloc(std::string name, uint64_t bytes, MemPool pool = MemPool::device, Stream s = {});
  /// Frees a buffer returned by alloc (not a slice). Buffers still live at case end are freed
  /// by the harness (and logged as such).
  void free(const Buffer& b);

  // ---- streams and events ----
  Stream stream() const { return Stream{0}; }
  /// The case's next stream (the n-th call in a case returns the n-th pooled stream).
  Stream create_stream(std::string name);
  /// Records an event at the stream's current position.
  Event record(Stream s);
  /// Orders later ops of `s` after the event.
  void wait(Stream s, Event e);
  /// Host waits for one stream / for all streams.
  void synchronize(Stream s);
  void synchronize();

  // ---- ops ----
  /// Launches `f(i)` for i in [0, n) in stream order. `f` is a CPRR_HD functor from kernels/, so
  /// the CUDA backend can launch the same functor as a kernel.
  template <class F>
  void launch(Stream s, std::string name, uint64_t n, F f, const Access& access) {
    log_op(s.id, "kernel", name, access);
    if (state_.backend->device_kernels()) {
      launch_on_device(s, std::move(name), n, f);
    } else {
      state_.backend->enqueue_host(s.id, "kernel " + name, [f, n] {
        for (uint64_t i = 0; i < n; ++i) f(i);
      });
    }
    issued();
  }
  /// Copies `b` to the host once stream `s` reaches this point and waits for it: how a case
  /// checks results on every backend (CUDA device memory is not host-accessible).
  template <class T>
  std::vector<T> read(Stream s, const Buffer& b) {
    std::vector<T> out(b.bytes / sizeof(T));
    read_bytes(s, b, out.data(), out.size() * sizeof(T));
    return out;
  }
  /// Copies `bytes` (default: all of src) from src to dst in stream order (H2D, D2H or D2D).
  void copy(Stream s, const Buffer& dst, const Buffer& src, uint64_t bytes = UINT64_MAX);
  /// Declares host-side accesses (e.g. the host filling a pinned staging buffer) for the op log.
  void host_access(std::string name, const Access& access);

  // ---- groups ----
  /// The world as a Group (id 0).
  const Group& world() const { return world_; }
  /// Splits the world, as NCCL's ncclCommSplit and MPI_Comm_split do: a collective of the world
  /// (every rank calls it, at the same place among the world's collectives, on the host), after
  /// which the ranks that passed one color (>= 0) form a group, ordered by `key` and then by
  /// world rank. A negative color joins no group (the result's member() is false). NCCL's
  /// ncclCommSplit on cuda with a GPU per rank; a Gloo context of the members on cpu and where
  /// ranks share a GPU (staged like the world's). The groups end with the case.
  Group split(int color, int key);
  /// split(color, rank()): the group keeps the world's order.
  Group split(int color) { return split(color, rank()); }

  // ---- collectives (counts derive from buffer sizes and dtype) ----
  void all_reduce(Stream s, const Buffer& buf, DType dtype, ReduceOp op = ReduceOp::sum);
  /// `out` holds world_size * in.bytes.
  void all_gather(Stream s, const Buffer& in, const Buffer& out, DType dtype);
  /// Counts are elements per peer, packed in rank order in `in` and `out`.
  void all_to_all_v(Stream s, const Buffer& in, std::vector<int64_t> send_counts, const Buffer& out,
                    std::vector<int64_t> recv_counts, DType dtype);
  void broadcast(Stream s, const Buffer& buf, DType dtype, int root);
  void barrier(Stream s);

  // ---- point-to-point (the pipeline pattern) ----
  // The n-th send of this rank to a peer is matched with that peer's n-th recv from this rank:
  // cprr checks their sizes and dtypes against each other, and names a recv whose send never
  // came (or a send never received) in a hang. A send completes only once its recv took it
  // (NCCL and Gloo alike): ranks that exchange on one stream order their sends and recvs (even
  // ranks send first, odd ranks receive first), or the stream waits forever.
  /// In stream order: sends `buf` (its bytes as `dtype` elements) to rank `peer`.
  void send(Stream s, int peer, const Buffer& buf, DType dtype);
  /// In stream order: receives into `buf` what rank `peer` sends.
  void recv(Stream s, int peer, const Buffer& buf, DType dtype);

  // ---- one-sided (the NVSHMEM / mscclpp pattern) ----
  // Every rank's symmetric pool is a window its peers can write. A symmetric buffer is addressed
  // at the same offset on every rank, so the ranks must allocate their symmetric buffers in the
  // same order and sizes. Nothing orders a put with the peer's own ops except signal/wait_signal.
  /// In stream order: copies `src` (any pool of this rank) into peer's copy of `dst` (a symmetric
  /// buffer or slice of this rank, same offset in the peer's window). Logged as a write of the
  /// peer's memory.
  void put(Stream s, int peer, const Buffer& dst, const Buffer& src);
  /// In stream order, after everything `s` did before (puts included) is visible to the peer:
  /// the peer's counter for (this rank, sem) rises by one. Its n-th signal sets epoch n.
  void signal(Stream s, int peer, Semaphore sem);
  /// Stream `s` waits for the peer's next signal on `sem`: the n-th wait_signal of this rank for
  /// (peer, sem) waits until the peer's n-th signal. A skipped wait leaves the epochs off by one,
  /// so the next wait returns on an old signal: the race the op log then shows.
  void wait_signal(Stream s, int peer, Semaphore sem);

  // ---- native work: a user's own kernels, library calls and NCCL calls, in the op log ----
  /// Runs `fn` with the native stream behind `s` and logs it as an op of `s` ("native") that
  /// reads and writes what `access` declares, so a user's own CUDA kernel, cuBLAS call or NCCL
  /// call takes part in the race, uninitialized-read and layout checks like cprr's own ops. On
  /// cuda `fn` gets the cudaStream_t, is called now and must only enqueue work on that stream;
  /// on the CPU backend it gets nullptr and runs as a host callback in `s`'s order, that is
  /// after native() returned: capture by value what it uses, never a local by reference.
  void native(Stream s, std::string name, const Access& access,
              const std::function<void(void* native_stream)>& fn);

  // ---- native handles, for real code (work issued on them directly is not in the op log) ----
  /// The cudaStream_t behind `s`, or nullptr on the CPU backend. Taking it is logged (a
  /// "handle" op that orders nothing), so the report can say the case issued work cprr did not
  /// see: use native() to have it checked.
  void* native_stream(Stream s);
  /// The GPU this rank runs on (its index among the visible ones); -1 on the CPU backend.
  int device_index() const { return state_.backend->device_index(); }
  /// The backend's name: "cpu" | "cuda".
  std::string_view backend_name() const { return state_.backend->name(); }
  /// The ncclComm_t of the world, or nullptr on the CPU backend (and where ranks share a GPU).
  /// Logged like native_stream(). Every rank asks at the same point: a world's first ask may
  /// make its symmetric pool (collective; runtime/cuda_backend.h).
  void* native_comm();
  /// Whether the world's collectives go through NCCL (native_comm() would not be null); a query,
  /// not logged.
  bool has_native_comm() const { return state_.backend->has_native_comm(); }
  /// How the world's collectives travel; a query, not logged.
  CollectiveTransport transport() const { return state_.backend->transport(); }

  // ---- captures ----
  /// Hashes `b` when stream `s` reaches this point: an intermediate that replay compares in order.
  void probe(std::string name, const Buffer& b, DType dtype, Stream s = {});
  /// Hashes `b` when stream `s` reaches this point: a result of the case.
  void output(std::string name, const Buffer& b, DType dtype, std::vector<int64_t> shape = {},
              Stream s = {});

  /// End of case, part 1 (harness): waits for every stream; rethrows the first op error.
  void drain();
  /// End of case, part 2 (harness, after drain): ends the case's groups, frees leftover buffers,
  /// forgets events and hands over the captures and logs. `clean`: the body returned and every
  /// stream drained, so the groups' communicators are finalized; otherwise they are aborted,
  /// waiting for no peer (one may still wait inside a group collective this rank skipped).
  CaseCapture finish(bool clean = true);

 private:
  /// The Python runtime's hooks (recorder/api/library_hooks.h) write the logs and captures kept
  /// here for what a case's own library does; they are no part of the Case API.
  friend class LibraryHooks;
  friend class Group;

  struct Live {
    MemPool pool;
    uint64_t offset;
    uint64_t bytes;
    std::string name;
  };
  /// Which bytes of its allocation `b` (a buffer or a slice of one) covers.
  ByteSpan span_of(const Buffer& b) const;
  /// Appends an op to the op log; a stream op first gets the replay's delay, if any. `library`:
  /// an op of the case's library, on a stream the backend does not own (timed on the host; its
  /// delay, if any, is the caller's to enqueue).
  OpRecord& log_op(int stream, std::string kind, std::string name, const Access& access,
                   int64_t event = -1, bool library = false);
  /// After an op is issued: the host waits for every stream when the replay asks for it there.
  void issued();
  /// Whether the replay asks the host to wait for every stream after op `seq` of this rank.
  bool replay_syncs_after(uint64_t seq) const;
  /// The delay a replay puts before op `seq` on a stream (microseconds, 0: none).
  uint32_t delay_before(uint64_t seq) const;
  /// A probe replay (Perturbation::probe_touches; context_probe.cpp): copies the bytes the op,
  /// just logged, is handed with no direction, once the device is idle. end_probe, at whatever
  /// the case does next (an op logged or issued, an untrack, a graph capture, the end), compares
  /// them once the op ran; while held (hold_probe: a declared block whose own ops log inside it)
  /// only end_probe(true) does, at the block's end.
  void begin_probe(const OpRecord& op);
  void end_probe(bool now = false);
  void hold_probe();
  /// Where a buffer of the case lives and how large it is: an allocation's, or a tracked
  /// tensor's (its address is the allocation log's offset); nullopt: neither.
  std::optional<std::pair<const std::byte*, uint64_t>> memory_of(uint32_t buffer) const;
  /// Checks a one-sided call's peer and semaphore; returns the semaphore's slot in the peer's
  /// (signal) or this rank's (wait_signal) table.
  uint32_t one_sided_slot(const char* what, int peer, Semaphore sem, bool in_peer_table) const;
  /// Logs a `signal` or `wait_signal` op as the next epoch of (peer, sem); returns the epoch.
  uint64_t log_epoch_op(const char* kind, Stream s, int peer, Semaphore sem);
  /// A semaphore value: the execution in the high half keeps an earlier case's signals below
  /// every epoch of this one.
  uint64_t semaphore_value(uint64_t epoch) const { return (execution_ << 32) | epoch; }
  void read_bytes(Stream s, const Buffer& b, void* dst, uint64_t bytes);
  template <class F>
  void launch_on_device(Stream s, std::string name, uint64_t n, const F& f) {
    if constexpr (kernels::kDeviceKernel<F>) {
#if CPRR_HAVE_CUDA
      kernels::device_launch(f, n, state_.backend->native_stream(s.id));
      state_.backend->note_launch(s.id, "kernel " + name);
      return;
#endif
    }
    CPRR_THROW_AS(CaseFailure,
                  "kernel '{}' has no device build, so it cannot run on the {} backend: make it a "
                  "CPRR_HD functor with kDeviceKernel and CPRR_DEVICE_KERNEL "
                  "(kernels/device_launch.h)",
                  name, state_.backend->name());
  }
  void log_alloc(bool is_free, uint32_t id, const Live& live, int stream);
  /// --trace: the last logged op is issued; mark where it ends (its stream's next point, or the
  /// host's clock for a host wait). Once per op; a no-op without a timeline.
  void mark_end();
  /// --trace: fills the timeline's op times from the backend's marks (streams drained).
  void collect_marks();
  /// Fills a new allocation with the replay's poison pattern.
  void poison(const Buffer& b, Stream s);
  /// finish(clean): the collectives that raised leave the collective log, later ones on their
  /// channels renumbered, and their op entries become plain ops (LibraryHooks::collective_raised).
  void drop_raised_collectives();
  /// Ends the case's groups on the backend, once (finish, or the destructor).
  void end_groups(bool clean);
  /// Numbers `call` in group `g`, logs it and issues it on the backend.
  void enqueue_collective(const Group& g, Stream s, CollectiveCall call, const Access& access);
  /// A send or recv of `g` with its rank `peer`.
  void message(const Group& g, Stream s, const char* kind, int peer, const Buffer& buf, DType dtype,
               const Access& access);
  /// Numbers `c` in its group (a collective) or on its channel (a send or recv), appends it to
  /// the collective log and enters it in the flight record; a collective is also logged as a
  /// `collective` op of its stream (event: its group, epoch: its number), which the
  /// happens-before check pairs across ranks. Returns its place in the log.
  std::size_t enter(CollectiveRecord c, const Access& access, bool library);
  void capture(bool is_output, std::string name, const Buffer& b, DType dtype,
               std::vector<int64_t> shape, Stream s);
  /// A probe's or output's record, numbered among its kind's, and its op in the log (on `stream`,
  /// with `access`): the one place a capture is made, for probe/output and the library's
  /// captures alike. The hasher fills in its digest.
  Capture& add_capture(bool is_output, std::string name, DType dtype, std::vector<int64_t> shape,
                       uint64_t bytes, int stream, const Access& access);

  RankState& state_;
  std::string name_;
  Params params_;
  uint64_t seed_;
  Placement placement_;
  Rng rng_;
  int streams_used_ = 1;
  uint32_t next_buffer_ = 1;
  /// The next number of each group's collectives (group, -1, -1) and of each channel's messages
  /// (group, sender, receiver).
  std::map<std::tuple<uint32_t, int32_t, int32_t>, uint64_t> next_number_;
  /// Collectives (indices into logs_.collectives) that raised in the case's library
  /// (LibraryHooks::collective_raised); finish(clean) drops them.
  std::set<std::size_t> raised_;
  uint64_t execution_ = 0;
  Perturbation perturbation_;
  Group world_;
  uint32_t next_group_ = 1;  ///< the id the case's next group gets
  bool groups_ended_ = false;
  /// One-sided epochs of this case: signals sent to and waits done for (peer, semaphore).
  std::map<std::pair<int, uint32_t>, uint64_t> signals_sent_;
  std::map<std::pair<int, uint32_t>, uint64_t> waits_done_;
  std::map<uint32_t, Live> live_;
  /// The case's library's tracked tensors still live, by address (LibraryHooks::library_launch
  /// looks launches' pointers up there); made at the case's first launch.
  std::unique_ptr<LiveMemory> library_tensors_;
  /// The case's library's CUDA graphs (library_graphs.h); made at its first capture.
  std::unique_ptr<LibraryGraphs> library_graphs_;
  /// The op a probe replay is probing: each touch's address and bytes before the op ran.
  struct TouchProbe {
    uint64_t seq = 0;
    std::vector<const std::byte*> at;
    std::vector<std::vector<std::byte>> before;
  };
  std::optional<TouchProbe> probe_;
  bool probe_held_ = false;
  // Captures are filled in by stream threads; a deque keeps their addresses stable.
  std::deque<Capture> probes_;
  std::deque<Capture> outputs_;
  CaseCapture logs_;
  bool finished_ = false;
  bool timeline_ = false;
  /// Per backend mark, in mark() order: the op it times and whether it is the op's end.
  std::vector<std::pair<uint64_t, bool>> mark_slots_;
  uint64_t ended_ops_ = 0;        ///< ops whose end is marked (they end in issue order)
  bool last_op_library_ = false;  ///< the last logged op is the library's (timed on the host)
};

}  // namespace cprr

/// Checks a condition inside a case body; failure ends the case on this rank as `fail` with the
/// file, line and formatted message.
#define CPRR_EXPECT(cond, ...)                                                                 \
  do {                                                                                         \
    if (!(cond))                                                                               \
      ::cprr::throw_at<::cprr::CaseFailure>(                                                   \
          __FILE__, __LINE__, "expectation failed: " #cond ": " + ::fmt::format(__VA_ARGS__)); \
  } while (0)

#include "runtime/cuda_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "runtime/cuda_check.h"
#include "runtime/host_info.h"

namespace cprr {
namespace {

// Defaults leave room for four ranks' worth of test data on one 80 GB card's share. The device
// arena's is per GPU: ranks that share one divide it (arena_bytes).
constexpr uint64_t kDefaultMib[] = {8192, 512, 256};  // device, symmetric, host (MemPool order)
constexpr const char* kSizeVars[] = {"CPRR_CUDA_DEVICE_MIB", "CPRR_CUDA_SYMMETRIC_MIB",
                                     "CPRR_CUDA_HOST_MIB"};

// `sharing`: the most ranks of the world on one GPU. A world then holds at most 8 GiB of device
// arena per GPU whatever its size, as a world of a GPU per rank does, so the worlds cprr keeps at
// once on one GPU (a pooled one, a fresh one, one shutting down, standby ones) fit as they do
// there: W=4 on one 80 GB GPU gets 2 GiB per rank, not 4 x 8 GiB per world.
uint64_t arena_bytes(int pool, int sharing) {
  const char* v = std::getenv(kSizeVars[pool]);
  uint64_t mib = kDefaultMib[pool];
  if (pool == static_cast<int>(MemPool::device)) mib /= static_cast<uint64_t>(sharing);
  if (v != nullptr && *v != '\0') {
    auto [end, ec] = std::from_chars(v, v + std::strlen(v), mib);
    if (ec != std::errc() || *end != '\0' || mib == 0) {
      CPRR_THROW_AS(UsageError, "{}='{}' is not a positive number of MiB", kSizeVars[pool], v);
    }
  }
  return mib << 20;
}

// Whether the kernel gives anonymous memory transparent huge pages on request ("always" or
// "madvise" chosen in /sys/kernel/mm/transparent_hugepage/enabled).
bool transparent_huge_pages() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(f, modes);
  return modes.find("[always]") != std::string::npos ||
         modes.find("[madvise]") != std::string::npos;
}

struct HostCall {
  std::function<void()> fn;
  std::mutex* mu;
  std::exception_ptr* error;
};

}  // namespace

int cuda_device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why != nullptr) {
      *why = fmt::format("cudaGetDeviceCount: {} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
    }
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  if (n == 0 && why != nullptr) {
    const char* vis = std::getenv("CUDA_VISIBLE_DEVICES");
    *why = fmt::format("no CUDA device is visible (CUDA_VISIBLE_DEVICES='{}')", vis ? vis : "");
  }
  return n;
}

std::vector<std::pair<std::string, std::string>> cuda_versions() {
  const int n = cuda_device_count(nullptr);
  if (n == 0) return {};
  auto dotted = [](int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); };
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  return {{"cuda_runtime", dotted(runtime)},
          {"cuda_driver", dotted(driver)},
          {"nccl", nccl_runtime_version()},
          {"gpu", fmt::format("{} x{}", prop.name, n)}};
}

CudaArena::CudaArena(Kind kind, uint64_t bytes) : kind_(kind) {
  void* p = nullptr;
  switch (kind) {
    case Kind::device:
      CPRR_CUDA(cudaMalloc(&p, bytes));
      break;
    case Kind::host: {
      if (map_huge_pinned(bytes)) return;  // zeroed and pinned already
      CPRR_CUDA(cudaMallocHost(&p, bytes));
      break;
    }
    case Kind::nccl:
      CPRR_NCCL(ncclMemAlloc(&p, bytes));
      break;
    case Kind::none:
      return;
  }
  data_ = static_cast<std::byte*>(p);
  try {
    CPRR_CUDA(cudaMemset(p, 0, bytes));
    // cudaMemset returns before it ran, on the default stream, which the backend's non-blocking
    // streams do not wait for: an arena is handed out only once it is zero (the semaphore table
    // in the symmetric arena must be, before any peer signals it).
    CPRR_CUDA(cudaStreamSynchronize(nullptr));
  } catch (...) {
    CudaArena owner;  // no destructor runs for a half-built object: free it through another
    std::swap(owner.kind_, kind_);
    std::swap(owner.data_, data_);
    throw;
  }
}

bool CudaArena::map_huge_pinned(uint64_t bytes) {
  int same_pointer = 0;
  int device = 0;
  cudaGetDevice(&device);
  // Kernels use the host arena's own addresses: registered memory must be usable through them.
  if (!transparent_huge_pages() ||
      cudaDeviceGetAttribute(&same_pointer, cudaDevAttrCanUseHostPointerForRegisteredMem, device) !=
          cudaSuccess ||
      same_pointer == 0) {
    return false;
  }
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  map_bytes_ = (bytes + kHuge - 1) / kHuge * kHuge + kHuge;  // room to align the start
  void* map =
      ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return false;
  map_ = map;
  auto* start =
      reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(map) + kHuge - 1) / kHuge * kHuge);
  ::madvise(start, bytes, MADV_HUGEPAGE);
  // A child a case forks must not share these pages copy-on-write: the parent's next write would
  // move it to a new page behind the device's back (as cudaMallocHost's memory is kept out).
  ::madvise(start, bytes, MADV_DONTFORK);
  std::memset(start, 0, bytes);  // faults the pages in, 2 MiB at a time
  if (cudaHostRegister(start, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped) !=
      cudaSuccess) {
    cudaGetLastError();
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    return false;
  }
  data_ = start;
  return true;
}

CudaArena& CudaArena::operator=(CudaArena&& o) noexcept {
  std::swap(kind_, o.kind_);
  std::swap(data_, o.data_);
  std::swap(map_, o.map_);
  std::swap(map_bytes_, o.map_bytes_);
  return *this;
}

CudaArena::~CudaArena() {
  if (data_ == nullptr) return;
  switch (kind_) {
    case Kind::device:
      cudaFree(data_);
      break;
    case Kind::host:
      if (map_ != nullptr) {
        cudaHostUnregister(data_);
        ::munmap(map_, map_bytes_);
      } else {
        cudaFreeHost(data_);
      }
      break;
    case Kind::nccl:
      ncclMemFree(data_);
      break;
    case Kind::none:
      break;
  }
}

CudaBackend::CudaBackend(const BackendConfig& config)
    : rank_(config.rank), world_size_(config.world_size), rendezvous_(config.rendezvous) {
  std::string why;
  const int gpus = cuda_device_count(&why);
  CPRR_CHECK(gpus > 0, "rank {}: the cuda backend needs a GPU: {}", rank_, why);
  // With fewer GPUs than ranks, ranks share them round-robin; their collectives then go through
  // Gloo (the controller decides from every rank's device_identity()).
  const bool launched = config.local_rank >= 0;
  device_ = (launched ? config.local_rank : rank_) % gpus;
  // Ranks on this host: every rank of the world with the local launcher; a launcher's count
  // where it says (CPRR_LOCAL_SIZE), else as many as GPUs (no sharing assumed).
  const int local_size = config.local_size > 0 ? config.local_size : launched ? gpus : world_size_;
  const int sharing = std::max(1, (local_size + gpus - 1) / gpus);
  // Rank 0's NCCL id costs NCCL's bootstrap set-up: not made where NCCL surely cannot be used.
  nccl_possible_ = launched || world_size_ <= gpus;
  CPRR_CUDA(cudaSetDevice(device_));
  CPRR_CUDA(cudaFree(nullptr));  // the primary context exists from here: timed as its own step
  startup_.lap("cuda context");
  for (int p = 0; p < 3; ++p) capacity_[p] = arena_bytes(p, sharing);
  // The device arena waits for the first case (prepare_arenas): see there.
  arenas_[static_cast<int>(MemPool::host)] = CudaArena(CudaArena::Kind::host, capacity_[2]);
  startup_.lap("host arena (pinned)");
  CPRR_CUDA(cudaMalloc(&barrier_scratch_, sizeof(int)));
  CPRR_CUDA(cudaMemset(barrier_scratch_, 0, sizeof(int)));
  stream(0, "default");
  startup_.lap("streams");
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  if ((comm_ && !comm_->aborted()) || (staged_ && !staged_->aborted())) {
    for (auto& s : streams_) cudaStreamSynchronize(s.handle);
  }
  window_.reset();  // closes IPC mappings of the peers' arenas while the communicator still lives
  staged_.reset();  // joins the Gloo lanes (idle once the streams drained)
  comm_.reset();
  for (auto& s : streams_) cudaStreamDestroy(s.handle);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  for (cudaEvent_t e : mark_events_) cudaEventDestroy(e);
  if (mark_origin_ != nullptr) cudaEventDestroy(mark_origin_);
  for (const Pending& p : pending_) {
    cudaEventDestroy(p.before);
    cudaEventDestroy(p.after);
  }
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  cudaFree(barrier_scratch_);
}

void CudaBackend::prepare_arenas() {
  CudaArena& arena = arenas_[static_cast<int>(MemPool::device)];
  if (arena.data() != nullptr) return;
  CPRR_CUDA(cudaSetDevice(device_));  // the calling thread's device may be another
  std::string failure;
  try {
    arena = CudaArena(CudaArena::Kind::device, capacity_[0]);
  } catch (const Error& e) {
    std::size_t free = 0, total = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free, &total);
    failure = fmt::format(
        "rank {}: cannot allocate the {} MiB device arena on GPU {} ({} of {} MiB free): other "
        "processes hold the rest (of cprr's worlds, a pooled one and a fresh one shutting down "
        "hold a device arena each, a standby one its CUDA context, communicator and symmetric "
        "arena); run fewer worlds at once (lower --standby) or smaller arenas "
        "(CPRR_CUDA_DEVICE_MIB) ({})",
        rank_, capacity_[0] >> 20, device_, free >> 20, total >> 20, e.what());
  }
  // Every rank of a world allocates at the world's first case, and they agree on the outcome:
  // one rank's failure is then every rank's error in that case, instead of its peers going on
  // into the case and waiting in its first collective, until the deadline, for a rank that
  // is not coming.
  if ((comm_ != nullptr || staged_ != nullptr) && world_size_ > 1) {
    const int first_failed = min_over_ranks(failure.empty() ? world_size_ : rank_);
    if (failure.empty() && first_failed < world_size_) {
      CPRR_THROW(
          "rank {}: rank {} of this world cannot allocate its {} MiB device arena (its error "
          "says why), so no rank runs the case",
          rank_, first_failed, capacity_[0] >> 20);
    }
  }
  if (!failure.empty()) CPRR_THROW("{}", failure);
}

std::byte* CudaBackend::arena_base(MemPool pool) {
  if (pool == MemPool::device) prepare_arenas();  // in-process users that run no CaseRunner
  std::byte* base = arenas_[static_cast<int>(pool)].data();
  CPRR_CHECK(base != nullptr, "rank {}: the {} pool exists only once the communicator is up", rank_,
             mem_pool_name(pool));
  return base;
}

uint64_t CudaBackend::arena_capacity(MemPool pool) const {
  return capacity_[static_cast<int>(pool)];
}

int CudaBackend::stream(int index, std::string_view name) {
  std::lock_guard lock(mu_);
  while (static_cast<int>(streams_.size()) <= index) {
    // Non-blocking streams, stream 0 included: the legacy default stream would order every
    // stream after it and hide exactly the races cprr looks for.
    StreamSlot slot;
    CPRR_CUDA(cudaStreamCreateWithFlags(&slot.handle, cudaStreamNonBlocking));
    slot.name = static_cast<int>(streams_.size()) == index ? std::string(name) : "";
    streams_.push_back(std::move(slot));
  }
  return index;
}

CudaBackend::StreamSlot& CudaBackend::at(int stream) {
  std::lock_guard lock(mu_);
  CPRR_CHECK(stream >= 0 && stream < static_cast<int>(streams_.size()), "no stream {}", stream);
  return streams_[stream];
}

void* CudaBackend::native_stream(int stream) { return at(stream).handle; }

namespace {

// `waiter` waits for what `recorded` enqueued so far. The event is destroyed at once: CUDA keeps
// it until the wait is resolved.
void order_streams(cudaStream_t waiter, cudaStream_t recorded) {
  cudaEvent_t e = nullptr;
  CPRR_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const cudaError_t rec = cudaEventRecord(e, recorded);
  const cudaError_t wait = rec == cudaSuccess ? cudaStreamWaitEvent(waiter, e, 0) : rec;
  cudaEventDestroy(e);
  CPRR_CUDA(wait);
}

}  // namespace

void CudaBackend::follow_native(int stream, void* native) {
  order_streams(at(stream).handle, static_cast<cudaStream_t>(native));
}

void CudaBackend::lead_native(void* native, int stream) {
  order_streams(static_cast<cudaStream_t>(native), at(stream).handle);
}

void CudaBackend::note_launch(int stream, std::string label) {
  StreamSlot& s = at(stream);
  std::lock_guard lock(mu_);
  s.last_op = std::move(label);
}

void CudaBackend::run_host_fn(void* arg) {
  std::unique_ptr<HostCall> call(static_cast<HostCall*>(arg));
  try {
    call->fn();
  } catch (...) {
    std::lock_guard lock(*call->mu);
    if (!*call->error) *call->error = std::current_exception();
  }
}

void CudaBackend::enqueue_host(int stream, std::string label, std::function<void()> fn) {
  auto call = std::make_unique<HostCall>(HostCall{std::move(fn), &mu_, &host_error_});
  CPRR_CUDA(cudaLaunchHostFunc(at(stream).handle, &CudaBackend::run_host_fn, call.get()));
  call.release();  // run_host_fn owns it now
  note_launch(stream, std::move(label));
}

void CudaBackend::copy_async(int stream, void* dst, const void* src, std::size_t bytes) {
  CPRR_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, at(stream).handle));
  note_launch(stream, "copy");
}

cudaEvent_t CudaBackend::take_event() { return take_spare_event(spare_events_); }

void CudaBackend::collective(int stream, CollectiveCall call) {
  CPRR_CHECK(comm_ != nullptr || staged_ != nullptr,
             "rank {}: collective {} before the communicator was connected", rank_, call.kind);
  cudaStream_t s = at(stream).handle;
  Pending p{call.seq, call.kind, nullptr, nullptr};
  {
    std::lock_guard lock(mu_);
    p.before = take_event();
    p.after = take_event();
  }
  try {
    guarded([&] {
      CPRR_CUDA(cudaEventRecord(p.before, s));
      if (staged_) {
        issue_staged(stream, s, call);
      } else {
        comm_->issue(call, s, barrier_scratch_);
      }
      CPRR_CUDA(cudaEventRecord(p.after, s));
    });
  } catch (...) {
    std::lock_guard lock(mu_);
    spare_events_.push_back(p.before);
    spare_events_.push_back(p.after);
    throw;
  }
  note_launch(stream, fmt::format("{} #{}", call.kind, call.seq));
  std::lock_guard lock(mu_);
  pending_.push_back(std::move(p));
}

int CudaBackend::create_event() {
  if (events_used_ == events_.size()) {
    cudaEvent_t e = nullptr;
    CPRR_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
  }
  return static_cast<int>(events_used_++);
}

void CudaBackend::record_event(int event, int stream) {
  CPRR_CHECK(event >= 0 && static_cast<std::size_t>(event) < events_used_, "no event {}", event);
  CPRR_CUDA(cudaEventRecord(events_[event], at(stream).handle));
}

void CudaBackend::wait_event(int stream, int event) {
  CPRR_CHECK(event >= 0 && static_cast<std::size_t>(event) < events_used_, "no event {}", event);
  CPRR_CUDA(cudaStreamWaitEvent(at(stream).handle, events_[event], 0));
}

void CudaBackend::begin_marks() {
  // The origin completes on an idle stream (a case starts after the previous one drained), so
  // the host's clock right after it completes is its time; every mark is timed against it.
  if (mark_origin_ == nullptr) CPRR_CUDA(cudaEventCreate(&mark_origin_));
  CPRR_CUDA(cudaEventRecord(mark_origin_, at(0).handle));
  CPRR_CUDA(cudaEventSynchronize(mark_origin_));
  mark_origin_ns_ = steady_now_ns();
  marks_used_ = 0;
}

void CudaBackend::mark(int stream) {
  if (marks_used_ == mark_events_.size()) {
    cudaEvent_t e = nullptr;
    CPRR_CUDA(cudaEventCreate(&e));  // with timing, unlike the case's own events
    mark_events_.push_back(e);
  }
  CPRR_CUDA(cudaEventRecord(mark_events_[marks_used_++], at(stream).handle));
}

std::vector<int64_t> CudaBackend::marks() {
  std::vector<int64_t> out;
  for (std::size_t i = 0; i < marks_used_; ++i) {
    float ms = 0;
    const bool reached = cudaEventQuery(mark_events_[i]) == cudaSuccess &&
                         cudaEventElapsedTime(&ms, mark_origin_, mark_events_[i]) == cudaSuccess;
    out.push_back(reached ? mark_origin_ns_ + static_cast<int64_t>(double{ms} * 1e6) : -1);
  }
  return out;
}

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

std::string CudaBackend::broken() const {
  std::lock_guard lock(mu_);
  return broken_;
}

void CudaBackend::wait_stream(int stream) {
  guarded([&] { poll_stream(stream); });
}

void CudaBackend::poll_stream(int stream) {
  cudaStream_t h = at(stream).handle;
  // Poll instead of cudaStreamSynchronize: a collective stuck on a dead or hung peer must leave
  // this thread free to notice an NCCL error or an abort.
  for (int spins = 0;; ++spins) {
    const cudaError_t r = cudaStreamQuery(h);
    if (r == cudaSuccess) return;
    if (r != cudaErrorNotReady) CPRR_CUDA(r);
    if (comm_) comm_->check_async();
    if (staged_) staged_->check_async();
    if (spins < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void CudaBackend::rethrow_host_error() {
  std::exception_ptr e;
  {
    std::lock_guard lock(mu_);
    std::swap(e, host_error_);
  }
  if (e) std::rethrow_exception(e);
}

void CudaBackend::synchronize(int stream) {
  wait_stream(stream);
  rethrow_host_error();
}

void CudaBackend::synchronize_all() {
  std::size_t n;
  {
    std::lock_guard lock(mu_);
    n = streams_.size();
  }
  wait_each_stream(n, [this](int i) { wait_stream(i); });
  rethrow_host_error();
}

CollectiveProgress CudaBackend::collective_progress() const {
  std::lock_guard lock(mu_);
  cudaSetDevice(device_);  // the watchdog thread has no current device of its own
  std::size_t done = 0;
  for (const Pending& p : pending_) {
    if (cudaEventQuery(p.before) != cudaSuccess) break;
    progress_.entered_seq = static_cast<int64_t>(p.seq);
    progress_.entered_kind = p.kind;
    if (cudaEventQuery(p.after) != cudaSuccess) break;
    progress_.completed_seq = static_cast<int64_t>(p.seq);
    progress_.completed_kind = p.kind;
    ++done;
  }
  for (std::size_t i = 0; i < done; ++i) {
    spare_events_.push_back(pending_[i].before);
    spare_events_.push_back(pending_[i].after);
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
  return progress_;
}

std::vector<std::string> CudaBackend::running_ops() const {
  std::lock_guard lock(mu_);
  cudaSetDevice(device_);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < streams_.size(); ++i) {
    if (cudaStreamQuery(streams_[i].handle) != cudaErrorNotReady) continue;
    out.push_back(fmt::format("stream {} ({}): busy; last enqueued: {}", i, streams_[i].name,
                              streams_[i].last_op));
  }
  return out;
}

void CudaBackend::reset_collective_progress() {
  {
    std::lock_guard lock(mu_);
    for (const Pending& p : pending_) {
      spare_events_.push_back(p.before);
      spare_events_.push_back(p.after);
    }
    pending_.clear();
    progress_ = CollectiveProgress{};
  }
  // Outside mu_: freeing pinned memory may wait for the device, and the watchdog's queries and
  // abort() take mu_. A case starts with every stream idle.
  if (staged_) staged_->case_started();
}

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
  }
  startup_.lap(staged_ ? "gloo communicator" : "nccl communicator");
  symmetric_ = make_symmetric_pool();
  startup_.lap("symmetric arena");
  make_window(symmetric_);
  startup_.lap("symmetric window");
}

int CudaBackend::min_over_ranks(int value) {
  if (staged_) return staged_->min_over_ranks(value);
  // Every copy on the collective's stream: the default stream would not order them with it.
  cudaStream_t s = streams_[0].handle;
  CPRR_CUDA(cudaMemcpyAsync(barrier_scratch_, &value, sizeof value, cudaMemcpyHostToDevice, s));
  CollectiveCall c{.kind = "all_reduce",
                   .dtype = DType::i32,
                   .op = ReduceOp::min,
                   .in = barrier_scratch_,
                   .out = barrier_scratch_,
                   .count = 1};
  comm_->issue(c, s, barrier_scratch_);
  wait_stream(0);
  CPRR_CUDA(cudaMemcpyAsync(&value, barrier_scratch_, sizeof value, cudaMemcpyDeviceToHost, s));
  CPRR_CUDA(cudaMemsetAsync(barrier_scratch_, 0, sizeof value, s));  // barrier() all-reduces zeros
  wait_stream(0);
  return value;
}

std::vector<std::byte> CudaBackend::all_gather_bytes(const void* mine, std::size_t bytes) {
  if (staged_) return staged_->all_gather_bytes(mine, bytes);
  const std::size_t total = bytes * static_cast<std::size_t>(world_size_);
  CudaArena gathered(CudaArena::Kind::device, total);
  std::byte* slot = gathered.data() + bytes * static_cast<std::size_t>(rank_);
  cudaStream_t s = streams_[0].handle;
  // Copies on the collective's own stream: the default stream would not order them with it.
  CPRR_CUDA(cudaMemcpyAsync(slot, mine, bytes, cudaMemcpyHostToDevice, s));
  CollectiveCall c{
      .kind = "all_gather", .dtype = DType::u8, .in = slot, .out = gathered.data(), .count = bytes};
  comm_->issue(c, s, barrier_scratch_);
  wait_stream(0);  // polls, so a peer that never joins cannot block this thread in a copy
  std::vector<std::byte> all(total);
  CPRR_CUDA(cudaMemcpyAsync(all.data(), gathered.data(), total, cudaMemcpyDeviceToHost, s));
  wait_stream(0);
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
    std::vector<std::byte*> bases =
        nccl_peer_bases(comm_->window(), world_size_, streams_[0].handle);
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

const CudaWindow& CudaBackend::window() const {
  CPRR_CHECK(window_ != nullptr, "rank {}: one-sided op before the communicator was connected",
             rank_);
  return *window_;
}

std::string CudaBackend::one_sided_problem() const {
  return window_ ? window_->problem() : "the communicator is not connected yet";
}

std::string CudaBackend::symmetric_pool() const {
  using Kind = SymmetricArena::Kind;
  const std::string peers = one_sided_problem().empty()
                                ? std::string(world_size_ == 1 ? "" : "; peers mapped")
                                : "; peers not mapped: " + one_sided_problem();
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

void CudaBackend::delay(int stream, uint32_t us) {
  if (us == 0) return;
  launch_delay(uint64_t{us} * 1000, at(stream).handle);
  note_launch(stream, fmt::format("delay {} us", us));
}

void CudaBackend::abort() {
  std::lock_guard lock(mu_);
  if (broken_.empty()) broken_ = "aborted by the controller";
  if (comm_) comm_->abort();
  if (staged_) staged_->abort();
}

void CudaBackend::issue_staged(int stream, cudaStream_t s, const CollectiveCall& call) {
  const int sym = static_cast<int>(MemPool::symmetric);
  const auto* out = static_cast<const std::byte*>(call.out);
  const std::byte* base = arenas_[sym].data();
  const std::size_t bytes = call.count * dtype_size(call.dtype);
  const bool in_pool = base != nullptr && out >= base && out <= base + capacity_[sym] &&
                       bytes <= static_cast<std::size_t>(base + capacity_[sym] - out);
  if (call.kind != "all_reduce" || !in_pool || !one_sided_problem().empty() || world_size_ == 1) {
    staged_->issue(stream, s, call);
    return;
  }
  const auto offset = static_cast<uint64_t>(out - base);
  std::vector<const std::byte*> peers;
  for (int r = 0; r < world_size_; ++r) peers.push_back(window().pool_at(r, offset, bytes));
  staged_->issue_symmetric_all_reduce(stream, s, call, std::move(peers));
}

}  // namespace cprr

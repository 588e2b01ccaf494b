// The CUDA backend: arenas, streams and events, launches and host callbacks, collectives (NCCL or
// Gloo staged), progress for the watchdog. Connecting the ranks, the symmetric window and the
// one-sided ops are cuda_backend_connect.cpp.
#include "runtime/cuda_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "runtime/cuda_check.h"
#include "runtime/env_number.h"
#include "runtime/host_info.h"
#include "runtime/transport_choice.h"

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
  uint64_t mib = kDefaultMib[pool];
  if (pool == static_cast<int>(MemPool::device)) mib /= static_cast<uint64_t>(sharing);
  // At most 2^40 MiB (an exbibyte), so the size in bytes fits in 64 bits.
  if (const std::optional<long long> set =
          env_number(kSizeVars[pool], 1, 1LL << 40, "a positive number of MiB"))
    mib = static_cast<uint64_t>(*set);
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

std::vector<std::string> cuda_gpu_uuids() {
  std::vector<std::string> out;
  for (int d = 0, n = cuda_device_count(nullptr); d < n; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      cudaGetLastError();
      out.push_back(std::to_string(d));
      continue;
    }
    // As nvidia-smi and CUDA_VISIBLE_DEVICES write it: GPU-8-4-4-4-12 hex digits.
    const auto* b = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
    std::string text = "GPU-";
    for (int i = 0; i < 16; ++i) {
      if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
      text += fmt::format("{:02x}", b[i]);
    }
    out.push_back(std::move(text));
  }
  return out;
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
  // Gloo (the controller decides from every rank's device_identity(): transport_choice.h).
  const bool launched = config.local_rank >= 0;
  device_ = local_device(launched ? config.local_rank : rank_, gpus);
  // Ranks on this host: every rank of the world with the local launcher; a launcher's count
  // where it says (CPRR_LOCAL_SIZE), else as many as GPUs (no sharing assumed).
  const int local_size = config.local_size > 0 ? config.local_size : launched ? gpus : world_size_;
  const int sharing = std::max(1, (local_size + gpus - 1) / gpus);
  // Rank 0's NCCL id costs NCCL's bootstrap set-up: not made where NCCL surely cannot be used.
  nccl_possible_ = launched || local_transport(world_size_, gpus, CollectivesRequest::automatic) ==
                                   CollectiveTransport::nccl;
  CPRR_CUDA(cudaSetDevice(device_));
  CPRR_CUDA(cudaFree(nullptr));  // the primary context exists from here: timed as its own step
  startup_.lap("cuda context");
  for (int p = 0; p < 3; ++p) capacity_[p] = arena_bytes(p, sharing);
  // The device arena waits for the first case (prepare_arenas), the pinned host arena for its
  // first use (arena_base): most cases never touch it, and pinning it costs every world ~60 ms.
  CPRR_CUDA(cudaMalloc(&barrier_scratch_, sizeof(int)));
  CPRR_CUDA(cudaMemset(barrier_scratch_, 0, sizeof(int)));
  CPRR_CUDA(cudaStreamCreateWithFlags(&setup_stream_, cudaStreamNonBlocking));
  stream(0, "default");
  startup_.lap("streams");
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  if ((comm_ && !comm_->aborted()) || (staged_ && !staged_->aborted())) {
    for (auto& s : streams_) cudaStreamSynchronize(s.handle);
  }
  window_.reset();  // closes IPC mappings of the peers' arenas while the communicator still lives
  end_groups(broken().empty());
  close_ended_groups();
  if (setup_stream_ != nullptr) cudaStreamDestroy(setup_stream_);
  cudaFree(split_scratch_);
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
  // Every rank of a world allocates at the world's first case, and where the ranks share GPUs
  // (Gloo, ready at once) they agree on the outcome: one rank's failure is then every rank's
  // error in that case. An NCCL world does not wait for its communicator here (it joins while
  // the case runs): a peer of the failing rank goes into the case, and the controller releases
  // it when it waits in a collective the failed rank never entered (World::blocked_on_failure).
  if (staged_ != nullptr && world_size_ > 1) {
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
  if (pool == MemPool::symmetric) ensure_symmetric();
  if (pool == MemPool::host) {
    // Each rank's own: made without its peers, so a case where one rank pins memory is fine.
    std::lock_guard lock(host_arena_mu_);
    CudaArena& host = arenas_[static_cast<int>(MemPool::host)];
    if (host.data() == nullptr) {
      CPRR_CUDA(cudaSetDevice(device_));  // registered with this rank's context
      host = CudaArena(CudaArena::Kind::host, capacity_[static_cast<int>(MemPool::host)]);
    }
  }
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

void CudaBackend::order_natives(void* waiter, void* recorded) {
  // Called from any thread (torch frees tensors on its autograd threads too): the event must be
  // made on this rank's device, whatever the thread's current one is.
  int current = 0;
  CPRR_CUDA(cudaGetDevice(&current));
  if (current != device_) CPRR_CUDA(cudaSetDevice(device_));
  order_streams(static_cast<cudaStream_t>(waiter), static_cast<cudaStream_t>(recorded));
  if (current != device_) CPRR_CUDA(cudaSetDevice(current));
}

void CudaBackend::delay_native(void* native, uint32_t us) {
  if (us > 0) launch_delay(uint64_t{us} * 1000, static_cast<cudaStream_t>(native));
}

void CudaBackend::synchronize_device() {
  cudaSetDevice(device_);
  // The library's streams are not the backend's: only a device-wide wait reaches them.
  CPRR_CUDA(cudaDeviceSynchronize());
  synchronize_all();
}

bool CudaBackend::read_memory(void* dst, const void* src, std::size_t bytes) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, src) != cudaSuccess) cudaGetLastError();
  // Host memory the driver does not know (a CPU tensor's) is read as the CPU backend reads it.
  if (attributes.type == cudaMemoryTypeUnregistered) return Backend::read_memory(dst, src, bytes);
  cudaSetDevice(device_);
  if (cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) == cudaSuccess) return true;
  cudaGetLastError();  // not sticky: the case's own next call must not see it
  return false;
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
  if (call.group != 0) {
    // A group's collective: no world progress to track (its numbers are the group's own).
    guarded([&] { issue_on_group(stream, s, call); });
    note_launch(stream, fmt::format("{} #{} (group {})", call.kind, call.seq, call.group));
    return;
  }
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
        // The set-up came before (before_communication, ahead of the op's delay).
        joined_comm().issue(call, s, barrier_scratch_);
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

std::string CudaBackend::broken() const {
  std::lock_guard lock(mu_);
  return broken_;
}

void CudaBackend::wait_stream(int stream) {
  guarded([&] { poll_stream(stream); });
}

void CudaBackend::poll_stream(int stream) { poll_handle(at(stream).handle); }

void CudaBackend::poll_handle(cudaStream_t h) {
  // Poll instead of cudaStreamSynchronize: a collective stuck on a dead or hung peer must leave
  // this thread free to notice an NCCL error or an abort.
  for (int spins = 0;; ++spins) {
    const cudaError_t r = cudaStreamQuery(h);
    if (r == cudaSuccess) return;
    if (r != cudaErrorNotReady) CPRR_CUDA(r);
    if (comm_) comm_->check_async();
    if (staged_) staged_->check_async();
    check_groups();
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
  for (auto& [id, g] : nccl_groups_) g->abort();
  for (auto& [id, g] : staged_groups_) g->abort();
  for (auto& g : ended_nccl_) g->abort();
  for (auto& g : ended_staged_) g->abort();
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

// Choosing and creating a backend. The CUDA backend exists only in builds with nvcc and NCCL
// (CPRR_HAVE_CUDA); every other file can ask for it by name and get a clear error otherwise.
#include "runtime/backend.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>

#include "runtime/cpu_backend.h"
#include "runtime/error.h"
#if CPRR_HAVE_CUDA
#include "runtime/cuda_backend.h"
#endif

namespace cprr {

void wait_each_stream(std::size_t n, const std::function<void(int)>& wait_one) {
  std::exception_ptr first;
  for (std::size_t i = 0; i < n; ++i) {
    try {
      wait_one(static_cast<int>(i));
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

std::vector<std::pair<int32_t, std::vector<int>>> split_groups(
    const std::vector<SplitVote>& votes) {
  std::map<int32_t, std::vector<int>> by_color;
  for (int r = 0; r < static_cast<int>(votes.size()); ++r) {
    if (votes[r].color >= 0) by_color[votes[r].color].push_back(r);
  }
  std::vector<std::pair<int32_t, std::vector<int>>> out;
  for (auto& [color, ranks] : by_color) {
    // Stable: equal keys keep world-rank order.
    std::stable_sort(ranks.begin(), ranks.end(),
                     [&](int a, int b) { return votes[a].key < votes[b].key; });
    out.emplace_back(color, std::move(ranks));
  }
  return out;
}

int group_rank(const std::vector<int>& members, int rank) {
  if (members.empty()) return -1;
  const auto me = std::find(members.begin(), members.end(), rank);
  CPRR_CHECK(me != members.end(), "rank {} is not among its group's members", rank);
  return static_cast<int>(me - members.begin());
}

std::vector<SplitVote> Backend::split_votes(SplitVote, uint32_t) {
  CPRR_THROW_AS(CaseFailure, "the {} backend cannot split its world into groups", name());
}
void Backend::make_group(uint32_t, SplitVote, const std::vector<int>&) {
  CPRR_THROW_AS(CaseFailure, "the {} backend cannot split its world into groups", name());
}

// One-sided ops on a backend without a window: Context checks one_sided_problem() first, so
// reaching these is a harness bug, reported as such.
void Backend::put(int, int, uint64_t, const void*, std::size_t) {
  CPRR_THROW("put on the {} backend: {}", name(), one_sided_problem());
}
void Backend::signal(int, int, uint32_t, uint64_t) {
  CPRR_THROW("signal on the {} backend: {}", name(), one_sided_problem());
}
void Backend::wait_signal(int, uint32_t, uint64_t) {
  CPRR_THROW("wait_signal on the {} backend: {}", name(), one_sided_problem());
}
bool Backend::read_memory(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return true;
  iovec local{dst, bytes};
  iovec remote{const_cast<void*>(src), bytes};
  const ssize_t n = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(bytes)) return true;
  if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
    std::memcpy(dst, src, bytes);  // a sandbox without the call: the memory is the case's own
    return true;
  }
  return false;
}

void Backend::delay(int, uint32_t) { CPRR_THROW("the {} backend cannot delay a stream", name()); }
void Backend::begin_marks() { CPRR_THROW("the {} backend cannot time its ops", name()); }
void Backend::mark(int) { CPRR_THROW("the {} backend cannot time its ops", name()); }
std::vector<int64_t> Backend::marks() { return {}; }

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::unique_ptr<Backend> make_backend(const BackendConfig& config) {
  if (config.kind == BackendKind::cpu) return std::make_unique<CpuBackend>(config);
#if CPRR_HAVE_CUDA
  return std::make_unique<CudaBackend>(config);
#else
  CPRR_THROW_AS(UsageError,
                "backend 'cuda' is not available in this build: use --backend cpu (rebuild with "
                "nvcc and NCCL installed for cuda)");
#endif
}

int visible_gpus(std::string* why) {
#if CPRR_HAVE_CUDA
  return cuda_device_count(why);
#else
  if (why != nullptr) *why = "this build has no CUDA backend (nvcc or NCCL was not found)";
  return 0;
#endif
}

std::vector<std::string> gpu_uuids() {
#if CPRR_HAVE_CUDA
  return cuda_gpu_uuids();
#else
  return {};
#endif
}

std::vector<std::pair<std::string, std::string>> device_versions() {
#if CPRR_HAVE_CUDA
  return cuda_versions();
#else
  return {};
#endif
}

BackendKind resolve_backend(std::string_view requested) {
  if (requested == "cpu") return BackendKind::cpu;
  std::string why;
  const int gpus = visible_gpus(&why);
  if (requested == "auto") return gpus > 0 ? BackendKind::cuda : BackendKind::cpu;
  if (requested == "cuda") {
    if (gpus > 0) return BackendKind::cuda;
    CPRR_THROW_AS(UsageError, "--backend cuda: no GPU can be used: {}; use --backend cpu or auto",
                  why);
  }
  CPRR_THROW_AS(UsageError, "--backend '{}' is not a backend: use auto, cpu or cuda", requested);
}

}  // namespace cprr

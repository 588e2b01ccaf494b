#pragma once
// Counting the CUDA work a Python case issues that no op of its op log covers: a custom
// extension's kernel launched past the dispatcher, a cudaMemcpyAsync called through ctypes.
// CUPTI's callback API reports every kernel launch and async copy or memset the process makes
// (runtime and driver API); one that a case body's thread makes outside a "seen" scope (an op
// the dispatch mode logged, a collective cprr logs, cprr's own hashing) is counted. Other
// threads are torch's own (Gloo's copies of a collective the log has, NCCL's watchdog): not
// counted. CUPTI is loaded
// with dlopen when counting starts, so nothing links it and a machine without it only loses
// the count.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cprr::python {

/// Starts counting, once per process: loads CUPTI from the first of `libraries` that opens and
/// subscribes to its launch and copy callbacks. Returns "" when counting, else why not (no
/// CUPTI, no CUDA in this build, another subscriber such as a profiler).
std::string start_unseen_counter(const std::vector<std::string>& libraries);
/// The calling thread runs a case body (on) or stopped (off): only such threads are counted.
void watch_this_thread(bool on);
/// The calling thread enters / leaves work the op log covers; scopes nest. What it did outside
/// since it last entered is counted on entering (or on take_unseen()).
void enter_seen();
void leave_seen();
/// What the calling thread did outside since it last entered seen work was an op's own, not
/// outside the op log (torch.tensor(data, device=cuda) copies its data before its lift_fresh op).
void forgive_pending();
/// The counts since the last call (the calling thread's pending work included), by what was
/// counted ("kernel launches", "async copies and memsets"); empty when nothing was.
std::map<std::string, uint64_t> take_unseen();

/// A kernel launch CUPTI reported on a watched thread outside seen work: what it names, before
/// it runs. A driver launch names a CUfunction; a runtime launch names its kernel as CUDA 13's
/// `<<<>>>` does (a cudaKernel_t) or as cudaLaunchKernel does (the host stub the runtime
/// registered); `handle` is that, and `kind` says which.
struct SeenLaunch {
  enum class Handle { function, kernel, host_stub };
  Handle kind = Handle::function;
  const void* handle = nullptr;
  const char* symbol = nullptr;  ///< its name as CUPTI gives it (mangled for C++ kernels)
  void* stream = nullptr;        ///< the CUstream (cudaStream_t) it is launched on
  void** params = nullptr;       ///< kernelParams / args: a pointer to each parameter's value
  void** extra = nullptr;        ///< or the packed buffer of cuLaunchKernel's `extra`
};
/// What the hook did with a launch.
enum class LaunchLogged {
  no,         ///< not logged: the launch is work outside the op log
  yes,        ///< logged as an op of the running case
  sync_after  ///< logged, and a replay asks for a host sync once the launch is issued
};
/// A copy or memset CUPTI reported the same way (cudaMemcpyAsync, cudaMemsetAsync, the driver's
/// cuMemcpyAsync and cuMemcpy{HtoD,DtoH,DtoD}Async): its extent, exact.
struct SeenCopy {
  const char* api = nullptr;  ///< the call's name (cudaMemcpyAsync...)
  void* stream = nullptr;
  uint64_t dst = 0;
  uint64_t src = 0;  ///< 0 for a memset
  uint64_t bytes = 0;
  bool is_set = false;
};
/// Logs a launch / a copy as an op of the running case (the C++ op capture's). Called on the
/// launching thread at the API's entry.
using LaunchHook = LaunchLogged (*)(void* user, const SeenLaunch& launch);
using CopyHook = LaunchLogged (*)(void* user, const SeenCopy& copy);
/// Called at the API's exit when a hook answered sync_after: the work is issued.
using LaunchDone = void (*)(void* user);
struct LaunchHooks {
  LaunchHook launch = nullptr;
  CopyHook copy = nullptr;
  LaunchDone done = nullptr;
};
/// Installs `hooks` for the process (empty: none); one case runs in a rank process at a time.
void set_launch_hook(const LaunchHooks& hooks, void* user);

/// CUPTI's callback itself, for tests that hand it made-up calls (`data`: a CUpti_CallbackData
/// of `domain` and callback `id`); a no-op in a build without CUPTI.
void cupti_callback_for_test(int domain, uint32_t id, const void* data);

/// enter_seen() for a scope of cprr's own work.
class SeenScope {
 public:
  SeenScope() { enter_seen(); }
  ~SeenScope() { leave_seen(); }
  SeenScope(const SeenScope&) = delete;
  SeenScope& operator=(const SeenScope&) = delete;
};

}  // namespace cprr::python

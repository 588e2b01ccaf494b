#include "python/native/unseen_work.h"

#include <atomic>
#include <mutex>
#include <optional>
#include <utility>

#include "python/native/kernel_name.h"

#if CPRR_HAVE_CUPTI
#include <cupti.h>
#include <dlfcn.h>
#endif

namespace cprr::python {
namespace {

thread_local bool watched = false;  // the thread runs a case body: its work is counted
thread_local int seen_depth = 0;
// Counted since the thread last entered seen work: kept apart until then, so that work which
// turns out to be an op's own (torch.tensor's copy, before its lift_fresh) can be let go.
thread_local uint64_t pending_launches = 0;
// Those launches by their kernels' symbols, for the report (a few distinct ones are enough).
thread_local std::map<std::string, uint64_t> pending_names;
constexpr size_t kNamesKept = 8;
thread_local uint64_t pending_copies = 0;
// Inside a runtime API call: the driver calls it makes are the same work, counted once.
thread_local bool in_runtime_call = false;
// The launch or copy under way was logged as an op (set_launch_hook): not counted, and a driver
// call the runtime makes for it is the same work.
thread_local bool call_logged = false;
// The hook asked for a host sync once the launch under way is issued (LaunchLogged::sync_after).
thread_local bool done_pending = false;
// Inside a hook: the calls it makes (a replay's delay kernel, the sync) are cprr's own and leave
// the state of the call that offered it as it was.
thread_local int in_hook = 0;

// The launch hook (set_launch_hook): the user pointer is stored before the hooks and cleared
// after them, so a callback never pairs a hook with another's pointer.
struct HookSlot {
  std::atomic<LaunchHook> hook{nullptr};
  std::atomic<CopyHook> copy{nullptr};
  std::atomic<LaunchDone> done{nullptr};
  std::atomic<void*> user{nullptr};
};
HookSlot& hook_slot() {
  static HookSlot slot;
  return slot;
}

// Adds `n` launches of `symbol` to `names`, which keeps a few distinct symbols only.
void add_name(std::map<std::string, uint64_t>& names, const std::string& symbol, uint64_t n) {
  if (names.size() < kNamesKept || names.count(symbol)) names[symbol] += n;
}

struct Counts {
  std::atomic<uint64_t> launches{0};
  std::atomic<uint64_t> copies{0};
  std::mutex names_mutex;
  std::map<std::string, uint64_t> names;  ///< the launches' kernels, under names_mutex
};

// CUPTI's subscription is the process's, and so are its counts: bumped from the callback on any
// thread, read by take_unseen().
Counts& counts() {
  static Counts c;
  return c;
}

#if CPRR_HAVE_CUPTI
// A launch outside the op log, by its kernel's symbol (demangled only for the report).
void count_launch(const CUpti_CallbackData& call) {
  ++pending_launches;
  add_name(pending_names, call.symbolName ? call.symbolName : "", 1);
}

constexpr int kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
};
constexpr int kRuntimeCopies[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
};
constexpr int kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};
constexpr int kDriverCopies[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
};

template <std::size_t N>
bool among(const int (&ids)[N], CUpti_CallbackId id) {
  for (int i : ids) {
    if (static_cast<CUpti_CallbackId>(i) == id) return true;
  }
  return false;
}

// CUDA 13's `<<<>>>` launch (crt/device_functions.h's __cudaLaunchKernel): CUPTI's meta header
// has no struct for it; its parameters are laid out as the signature declares them.
struct KernelHandleLaunchParams {
  cudaKernel_t kernel;
  dim3 gridDim;
  dim3 blockDim;
  void** args;
  size_t sharedMem;
  cudaStream_t stream;
};

// The launch `call` reports, as the hook sees it; nullopt when its kind is not one the hook
// takes (a cooperative launch, a graph).
std::optional<SeenLaunch> seen_launch(bool runtime, CUpti_CallbackId id,
                                      const CUpti_CallbackData& call) {
  SeenLaunch l;
  l.symbol = call.symbolName;
  const void* params = call.functionParams;
  const auto driver = [&](const auto* p, CUstream stream) {
    l.handle = p->f;
    l.stream = stream;
    l.params = p->kernelParams;
    l.extra = p->extra;
  };
  const auto stub = [&](const void* func, void** args, cudaStream_t stream) {
    l.kind = SeenLaunch::Handle::host_stub;
    l.handle = func;
    l.params = args;
    l.stream = stream;
  };
  const auto config_stream = [](const auto* config) { return config ? config->stream : nullptr; };
  if (runtime) {
    switch (id) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000: {
        const auto* p = static_cast<const cudaLaunchKernel_v7000_params*>(params);
        stub(p->func, p->args, p->stream);
        return l;
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000: {
        const auto* p = static_cast<const cudaLaunchKernel_ptsz_v7000_params*>(params);
        stub(p->func, p->args, p->stream);
        return l;
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060: {
        const auto* p = static_cast<const cudaLaunchKernelExC_v11060_params*>(params);
        stub(p->func, p->args, config_stream(p->config));
        return l;
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
        const auto* p = static_cast<const cudaLaunchKernelExC_ptsz_v11060_params*>(params);
        stub(p->func, p->args, config_stream(p->config));
        return l;
      }
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000: {
        const auto* p = static_cast<const KernelHandleLaunchParams*>(params);
        l.kind = SeenLaunch::Handle::kernel;
        l.handle = p->kernel;
        l.params = p->args;
        l.stream = p->stream;
        return l;
      }
      default:
        return std::nullopt;
    }
  }
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
      const auto* p = static_cast<const cuLaunchKernel_params*>(params);
      driver(p, p->hStream);
      return l;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      const auto* p = static_cast<const cuLaunchKernel_ptsz_params*>(params);
      driver(p, p->hStream);
      return l;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
      const auto* p = static_cast<const cuLaunchKernelEx_params*>(params);
      driver(p, p->config ? p->config->hStream : nullptr);
      return l;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const auto* p = static_cast<const cuLaunchKernelEx_ptsz_params*>(params);
      driver(p, p->config ? p->config->hStream : nullptr);
      return l;
    }
    default:
      return std::nullopt;
  }
}

// The copy `call` reports, as the copy hook sees it; nullopt for one it does not take (a 2D
// copy, a synchronous one: counted).
std::optional<SeenCopy> seen_copy(bool runtime, CUpti_CallbackId id,
                                  const CUpti_CallbackData& call) {
  SeenCopy c;
  c.api = call.functionName;
  const void* params = call.functionParams;
  const auto address = [](auto p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); };
  if (runtime && id == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020) {
    const auto* p = static_cast<const cudaMemcpyAsync_v3020_params*>(params);
    c = {c.api, p->stream, address(p->dst), address(p->src), p->count, false};
    return c;
  }
  if (runtime && id == CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020) {
    const auto* p = static_cast<const cudaMemsetAsync_v3020_params*>(params);
    c = {c.api, p->stream, address(p->devPtr), 0, p->count, true};
    return c;
  }
  if (runtime) return std::nullopt;
  const auto driver = [&](const auto* p, uint64_t dst, uint64_t src) {
    c = {c.api, p->hStream, dst, src, p->ByteCount, false};
    return c;
  };
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync: {
      const auto* p = static_cast<const cuMemcpyAsync_params*>(params);
      return driver(p, p->dst, p->src);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2: {
      const auto* p = static_cast<const cuMemcpyHtoDAsync_v2_params*>(params);
      return driver(p, p->dstDevice, address(p->srcHost));
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2: {
      const auto* p = static_cast<const cuMemcpyDtoHAsync_v2_params*>(params);
      return driver(p, address(p->dstHost), p->srcDevice);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2: {
      const auto* p = static_cast<const cuMemcpyDtoDAsync_v2_params*>(params);
      return driver(p, p->dstDevice, p->srcDevice);
    }
    default:
      return std::nullopt;
  }
}

// The hook's answer, as the call's state: whether it logged, whether a sync follows at its exit.
bool answered(LaunchLogged logged) {
  done_pending = logged == LaunchLogged::sync_after;
  return logged != LaunchLogged::no;
}

// Offers the copy `call` reports to the copy hook; whether it logged it.
bool log_copy(bool runtime, CUpti_CallbackId id, const CUpti_CallbackData& call) {
  const CopyHook hook = hook_slot().copy.load();
  if (hook == nullptr) return false;
  const std::optional<SeenCopy> copy = seen_copy(runtime, id, call);
  if (!copy) return false;
  ++in_hook;  // what the hook issues is cprr's own
  const LaunchLogged logged = hook(hook_slot().user.load(), *copy);
  --in_hook;
  return answered(logged);
}

// Offers the launch `call` reports to the launch hook; whether it logged it.
bool log_launch(bool runtime, CUpti_CallbackId id, const CUpti_CallbackData& call) {
  const LaunchHook hook = hook_slot().hook.load();
  if (hook == nullptr) return false;
  const std::optional<SeenLaunch> launch = seen_launch(runtime, id, call);
  if (!launch) return false;
  ++in_hook;  // what the hook issues (a replay's delay kernel) is cprr's own
  const LaunchLogged logged = hook(hook_slot().user.load(), *launch);
  --in_hook;
  return answered(logged);
}

// At a launch's exit: the hook's sync, when it asked for one.
void launch_done() {
  if (!std::exchange(done_pending, false)) return;
  if (const LaunchDone done = hook_slot().done.load()) {
    ++in_hook;
    done(hook_slot().user.load());
    --in_hook;
  }
}

void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (in_hook > 0) return;
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const bool launch = runtime ? among(kRuntimeLaunches, id) : among(kDriverLaunches, id);
  const bool counted = watched && seen_depth == 0;
  if (call->callbackSite == CUPTI_API_EXIT) {
    if (!runtime && in_runtime_call) return;  // the runtime call's exit settles it
    if (runtime) in_runtime_call = false;
    // A runtime launch is counted once it is done, unless it was logged.
    const bool logged = std::exchange(call_logged, false);
    if (launch && runtime && counted && !logged) count_launch(*call);
    launch_done();
    return;
  }
  if (runtime) {
    in_runtime_call = true;
    call_logged = false;
    done_pending = false;
  }
  if (!counted) return;
  if (launch) {
    // A driver launch the runtime makes for a launch it logged is that launch.
    if (!runtime && in_runtime_call && call_logged) return;
    if (log_launch(runtime, id, *call)) {
      call_logged = true;
      return;
    }
    // A runtime launch is counted at its exit, a driver launch now (unless the runtime's).
    if (!runtime && !in_runtime_call) count_launch(*call);
    return;
  }
  // A runtime call's driver calls are its own work.
  if (!runtime && in_runtime_call) return;
  if (log_copy(runtime, id, *call)) {
    call_logged = true;
    return;
  }
  ++pending_copies;
}

struct Cupti {
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiEnableCallback) enable = nullptr;
  decltype(&cuptiGetResultString) describe = nullptr;
};

std::string describe(const Cupti& api, CUptiResult r) {
  const char* text = nullptr;
  if (api.describe && api.describe(r, &text) == CUPTI_SUCCESS && text) return text;
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

template <std::size_t N>
std::string enable_all(const Cupti& api, CUpti_SubscriberHandle s, CUpti_CallbackDomain domain,
                       const int (&ids)[N]) {
  for (int id : ids) {
    const CUptiResult r = api.enable(1, s, domain, static_cast<CUpti_CallbackId>(id));
    if (r != CUPTI_SUCCESS) return "cuptiEnableCallback: " + describe(api, r);
  }
  return "";
}

std::string start_once(const std::vector<std::string>& libraries) {
  void* lib = nullptr;
  for (const std::string& path : libraries) {
    if ((lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  }
  if (lib == nullptr) return "no CUPTI library could be opened (libcupti.so)";
  Cupti api;
  api.subscribe = reinterpret_cast<decltype(api.subscribe)>(dlsym(lib, "cuptiSubscribe"));
  api.enable = reinterpret_cast<decltype(api.enable)>(dlsym(lib, "cuptiEnableCallback"));
  api.describe = reinterpret_cast<decltype(api.describe)>(dlsym(lib, "cuptiGetResultString"));
  if (!api.subscribe || !api.enable) return "the CUPTI library lacks cuptiSubscribe";
  CUpti_SubscriberHandle subscriber = nullptr;
  if (const CUptiResult r = api.subscribe(&subscriber, on_api, nullptr); r != CUPTI_SUCCESS) {
    return "cuptiSubscribe: " + describe(api, r);
  }
  // The subscription lives as long as the process: CUPTI holds the library open.
  for (const std::string& why :
       {enable_all(api, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeLaunches),
        enable_all(api, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeCopies),
        enable_all(api, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, kDriverLaunches),
        enable_all(api, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, kDriverCopies)}) {
    if (!why.empty()) return why;
  }
  return "";
}
#endif

}  // namespace

std::string start_unseen_counter(const std::vector<std::string>& libraries) {
#if CPRR_HAVE_CUPTI
  static std::once_flag once;
  static std::string why;
  std::call_once(once, [&] { why = start_once(libraries); });
  return why;
#else
  (void)libraries;
  return "this build has no CUPTI (cupti.h was not found)";
#endif
}

namespace {

void commit_pending() {
  counts().launches.fetch_add(pending_launches, std::memory_order_relaxed);
  counts().copies.fetch_add(pending_copies, std::memory_order_relaxed);
  pending_launches = pending_copies = 0;
  if (pending_names.empty()) return;
  std::lock_guard<std::mutex> lock(counts().names_mutex);
  for (const auto& [symbol, n] : pending_names) add_name(counts().names, symbol, n);
  pending_names.clear();
}

// "kernel launches (a x2, b, ...)": which of the `total` launches' kernels were kept by name;
// "..." when some were not.
std::string launches_named(uint64_t total) {
  std::map<std::string, uint64_t> names;
  {
    std::lock_guard<std::mutex> lock(counts().names_mutex);
    names.swap(counts().names);
  }
  std::string out = "kernel launches";
  const char* sep = " (";
  uint64_t named = 0;
  for (const auto& [symbol, n] : names) {
    out += sep + kernel_name(symbol.c_str()) + (n > 1 ? " x" + std::to_string(n) : "");
    sep = ", ";
    named += n;
  }
  if (names.empty()) return out;
  return out + (named < total ? ", ...)" : ")");
}

}  // namespace

void set_launch_hook(const LaunchHooks& hooks, void* user) {
  HookSlot& slot = hook_slot();
  if (hooks.launch == nullptr && hooks.copy == nullptr) {
    slot.hook.store(nullptr);
    slot.copy.store(nullptr);
    slot.done.store(nullptr);
    slot.user.store(nullptr);
  } else {
    slot.user.store(user);
    slot.done.store(hooks.done);
    slot.copy.store(hooks.copy);
    slot.hook.store(hooks.launch);
  }
}

void cupti_callback_for_test(int domain, uint32_t id, const void* data) {
#if CPRR_HAVE_CUPTI
  on_api(nullptr, static_cast<CUpti_CallbackDomain>(domain), static_cast<CUpti_CallbackId>(id),
         data);
#else
  (void)domain, (void)id, (void)data;
#endif
}

void watch_this_thread(bool on) { watched = on; }
void enter_seen() {
  commit_pending();
  ++seen_depth;
}
void forgive_pending() {
  pending_launches = pending_copies = 0;
  pending_names.clear();
}
void leave_seen() { --seen_depth; }

std::map<std::string, uint64_t> take_unseen() {
  commit_pending();
  std::map<std::string, uint64_t> out;
  const uint64_t n = counts().launches.exchange(0);
  const std::string launches = launches_named(n);  // emptied either way
  if (n > 0) out[launches] = n;
  if (const uint64_t n = counts().copies.exchange(0)) out["async copies and memsets"] = n;
  return out;
}

}  // namespace cprr::python

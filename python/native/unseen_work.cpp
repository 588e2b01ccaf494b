#include "python/native/unseen_work.h"

#include <atomic>
#include <utility>

#if CPRR_HAVE_CUPTI
#include <cupti.h>
#include <dlfcn.h>

#include <mutex>
#endif

namespace cprr::python {
namespace {

thread_local bool watched = false;  // the thread runs a case body: its work is counted
thread_local int seen_depth = 0;
// Counted since the thread last entered seen work: kept apart until then, so that work which
// turns out to be an op's own (torch.tensor's copy, before its lift_fresh) can be let go.
thread_local uint64_t pending_launches = 0;
thread_local uint64_t pending_copies = 0;
// Inside a runtime API call: the driver calls it makes are the same work, counted once.
thread_local bool in_runtime_call = false;
// The runtime launch's driver launch was logged as an op (set_launch_hook): not counted.
thread_local bool runtime_launch_logged = false;

// The launch hook (set_launch_hook): the user pointer is stored before the hook and cleared
// after it, so a callback never pairs a hook with another's pointer.
struct HookSlot {
  std::atomic<LaunchHook> hook{nullptr};
  std::atomic<void*> user{nullptr};
};
HookSlot& hook_slot() {
  static HookSlot slot;
  return slot;
}

struct Counts {
  std::atomic<uint64_t> launches{0};
  std::atomic<uint64_t> copies{0};
};

// CUPTI's subscription is the process's, and so are its counts: bumped from the callback on any
// thread, read by take_unseen().
Counts& counts() {
  static Counts c;
  return c;
}

#if CPRR_HAVE_CUPTI
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

// The driver launch `call` reports, for the launch hook; false when its kind is not one the
// hook takes (a cooperative launch) or no hook is set.
bool log_launch(CUpti_CallbackId id, const CUpti_CallbackData& call) {
  const LaunchHook hook = hook_slot().hook.load();
  if (hook == nullptr) return false;
  SeenLaunch l;
  l.symbol = call.symbolName;
  const auto fill = [&](const auto* p, CUstream stream) {
    l.function = p->f;
    l.stream = stream;
    l.params = p->kernelParams;
    l.extra = p->extra;
  };
  const void* params = call.functionParams;
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
      const auto* p = static_cast<const cuLaunchKernel_params*>(params);
      fill(p, p->hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      const auto* p = static_cast<const cuLaunchKernel_ptsz_params*>(params);
      fill(p, p->hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
      const auto* p = static_cast<const cuLaunchKernelEx_params*>(params);
      fill(p, p->config ? p->config->hStream : nullptr);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const auto* p = static_cast<const cuLaunchKernelEx_ptsz_params*>(params);
      fill(p, p->config ? p->config->hStream : nullptr);
      break;
    }
    default:
      return false;
  }
  return hook(hook_slot().user.load(), l);
}

void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const bool launch = runtime ? among(kRuntimeLaunches, id) : among(kDriverLaunches, id);
  const bool counted = watched && seen_depth == 0;
  if (call->callbackSite == CUPTI_API_EXIT) {
    if (!runtime) return;
    in_runtime_call = false;
    // A runtime launch is counted once it is done, unless its driver launch was logged.
    if (counted && launch && !std::exchange(runtime_launch_logged, false)) ++pending_launches;
    return;
  }
  if (runtime) {
    in_runtime_call = true;
    runtime_launch_logged = false;
  }
  if (!counted) return;
  if (!runtime && launch && log_launch(id, *call)) {
    runtime_launch_logged = in_runtime_call;
    return;
  }
  // A runtime launch is counted at its exit; a runtime call's driver calls are its own work.
  if (runtime ? launch : in_runtime_call) return;
  ++(launch ? pending_launches : pending_copies);
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
}

}  // namespace

void set_launch_hook(LaunchHook hook, void* user) {
  HookSlot& slot = hook_slot();
  if (hook == nullptr) {
    slot.hook.store(nullptr);
    slot.user.store(nullptr);
  } else {
    slot.user.store(user);
    slot.hook.store(hook);
  }
}

void watch_this_thread(bool on) { watched = on; }
void enter_seen() {
  commit_pending();
  ++seen_depth;
}
void forgive_pending() { pending_launches = pending_copies = 0; }
void leave_seen() { --seen_depth; }

std::map<std::string, uint64_t> take_unseen() {
  commit_pending();
  std::map<std::string, uint64_t> out;
  if (const uint64_t n = counts().launches.exchange(0)) out["kernel launches"] = n;
  if (const uint64_t n = counts().copies.exchange(0)) out["async copies and memsets"] = n;
  return out;
}

}  // namespace cprr::python

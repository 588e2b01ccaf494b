// unseen_work's CUPTI callback, handed made-up launches as CUPTI reports them (no GPU, no CUPTI
// library: the callback is called directly): which launches reach the launch hook and with what
// handle, which are counted outside the op log and by what name, and when a replay's sync after
// a launch comes. A runtime launch makes a driver launch inside it; the two are one launch.
#include "python/native/unseen_work.h"

#include <cupti.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cprr::python {
namespace {

// What the hook was offered and answers with, for one test at a time (the hook is a plain
// function pointer; `user` points here).
struct Hook {
  std::vector<SeenLaunch> offered;
  std::vector<SeenCopy> copies;
  std::vector<LaunchLogged> answers;  // by offer (launch or copy), then LaunchLogged::no
  int done = 0;

  LaunchLogged answer() const {
    const size_t n = offered.size() + copies.size();
    return n <= answers.size() ? answers[n - 1] : LaunchLogged::no;
  }
  static LaunchLogged offer(void* user, const SeenLaunch& launch) {
    auto* h = static_cast<Hook*>(user);
    h->offered.push_back(launch);
    return h->answer();
  }
  static LaunchLogged offer_copy(void* user, const SeenCopy& copy) {
    auto* h = static_cast<Hook*>(user);
    h->copies.push_back(copy);
    return h->answer();
  }
  static void finished(void* user) { ++static_cast<Hook*>(user)->done; }
};

// A case body's thread with `hook` installed; the counts start empty.
class UnseenWork : public ::testing::Test {
 protected:
  void SetUp() override {
    take_unseen();
    watch_this_thread(true);
    set_launch_hook(LaunchHooks{&Hook::offer, &Hook::offer_copy, &Hook::finished}, &hook_);
  }
  void TearDown() override {
    set_launch_hook(LaunchHooks{}, nullptr);
    watch_this_thread(false);
    take_unseen();
  }

  // One API call's entry or exit as CUPTI reports it.
  static void call(CUpti_CallbackDomain domain, CUpti_CallbackId id, CUpti_ApiCallbackSite site,
                   const void* params, const char* symbol) {
    CUpti_CallbackData data{};
    data.callbackSite = site;
    data.functionParams = params;
    data.symbolName = symbol;
    cupti_callback_for_test(domain, id, &data);
  }

  // cudaLaunchKernel of the host stub `stub_`, with the driver launch the runtime makes inside
  // it (`with_driver`); `between` runs after the driver launch's exit, before the runtime's.
  template <typename Between>
  void runtime_launch(const char* symbol, bool with_driver, Between between) {
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
         CUPTI_API_ENTER, &runtime_params_, symbol);
    if (with_driver) driver_launch(symbol);
    between();
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
         CUPTI_API_EXIT, &runtime_params_, symbol);
  }
  void runtime_launch(const char* symbol, bool with_driver) {
    runtime_launch(symbol, with_driver, [] {});
  }
  void driver_launch(const char* symbol) {
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_ENTER,
         &driver_params_, symbol);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_EXIT,
         &driver_params_, symbol);
  }

  Hook hook_;
  int stub_ = 0;        // a host stub's address
  int function_ = 0;    // a CUfunction's
  void* args_[1] = {};  // kernelParams
  cudaLaunchKernel_v7000_params runtime_params_{
      &stub_, dim3(1), dim3(1), args_, 0, reinterpret_cast<cudaStream_t>(0x5)};
  cuLaunchKernel_params driver_params_{
      reinterpret_cast<CUfunction>(&function_), 1,     1,      1, 1, 1, 1, 0,
      reinterpret_cast<CUstream>(0x5),          args_, nullptr};
};

TEST_F(UnseenWork, ARuntimeLaunchTheHookLogsIsOfferedOnceByItsStubAndNotCounted) {
  hook_.answers = {LaunchLogged::yes};
  runtime_launch("_Z4fillPf", true);
  ASSERT_EQ(hook_.offered.size(), 1u) << "the driver launch inside is the same launch";
  EXPECT_EQ(hook_.offered[0].kind, SeenLaunch::Handle::host_stub);
  EXPECT_EQ(hook_.offered[0].handle, &stub_);
  EXPECT_EQ(hook_.offered[0].params, args_);
  EXPECT_EQ(hook_.offered[0].stream, reinterpret_cast<void*>(0x5));
  EXPECT_TRUE(take_unseen().empty());
  EXPECT_EQ(hook_.done, 0);
}

TEST_F(UnseenWork, AStubTheHookCannotReadGetsASecondOfferAsTheDriverLaunchInside) {
  hook_.answers = {LaunchLogged::no, LaunchLogged::yes};
  runtime_launch("_Z4fillPf", true);
  ASSERT_EQ(hook_.offered.size(), 2u);
  EXPECT_EQ(hook_.offered[1].kind, SeenLaunch::Handle::function);
  EXPECT_EQ(hook_.offered[1].handle, &function_);
  EXPECT_TRUE(take_unseen().empty()) << "logged through its driver launch: not counted";
}

TEST_F(UnseenWork, ALaunchNoOfferLogsIsCountedOnceByItsKernelsDemangledName) {
  runtime_launch("_Z4fillPf", true);
  runtime_launch("_Z4fillPf", false);
  driver_launch("triton_scale");
  const std::map<std::string, uint64_t> unseen = take_unseen();
  ASSERT_EQ(unseen.size(), 1u);
  EXPECT_EQ(unseen.begin()->first, "kernel launches (fill(float*) x2, triton_scale)");
  EXPECT_EQ(unseen.begin()->second, 3u);
  EXPECT_TRUE(take_unseen().empty()) << "taken: the next case starts from nothing";
}

TEST_F(UnseenWork, AReplaysSyncAfterARuntimeLaunchComesAtTheRuntimeCallsExit) {
  hook_.answers = {LaunchLogged::no, LaunchLogged::sync_after};
  int done_before_runtime_exit = -1;
  runtime_launch("_Z4fillPf", true, [&] { done_before_runtime_exit = hook_.done; });
  EXPECT_EQ(done_before_runtime_exit, 0) << "not at the driver launch's exit, inside the call";
  EXPECT_EQ(hook_.done, 1);
  runtime_launch("_Z4fillPf", true);  // the hook logs nothing more: no second sync
  EXPECT_EQ(hook_.done, 1);
}

TEST_F(UnseenWork, AReplaysSyncAfterADriverLaunchComesAtItsExit) {
  hook_.answers = {LaunchLogged::sync_after};
  call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_ENTER,
       &driver_params_, "triton_scale");
  EXPECT_EQ(hook_.done, 0) << "before the launch is issued, a sync orders nothing";
  call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_EXIT,
       &driver_params_, "triton_scale");
  EXPECT_EQ(hook_.done, 1);
}

TEST_F(UnseenWork, CudaThirteensKernelHandleLaunchIsOfferedWithItsKernel) {
  // crt/device_functions.h's __cudaLaunchKernel(kernel, grid, block, args, shared, stream).
  struct {
    void* kernel;
    dim3 grid, block;
    void** args;
    size_t shared;
    cudaStream_t stream;
  } params{&function_, dim3(1), dim3(1), args_, 0, reinterpret_cast<cudaStream_t>(0x7)};
  hook_.answers = {LaunchLogged::yes};
  for (CUpti_ApiCallbackSite site : {CUPTI_API_ENTER, CUPTI_API_EXIT}) {
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, site,
         &params, "_Z4fillPf");
  }
  ASSERT_EQ(hook_.offered.size(), 1u);
  EXPECT_EQ(hook_.offered[0].kind, SeenLaunch::Handle::kernel);
  EXPECT_EQ(hook_.offered[0].handle, &function_);
  EXPECT_EQ(hook_.offered[0].stream, reinterpret_cast<void*>(0x7));
  EXPECT_TRUE(take_unseen().empty());
}

TEST_F(UnseenWork, ACopyAndAMemsetAreOfferedWithTheirExtentAndCountedWhenNotLogged) {
  int host[4] = {};
  cudaMemcpyAsync_v3020_params copy{reinterpret_cast<void*>(0x1000), host, 16,
                                    cudaMemcpyHostToDevice, reinterpret_cast<cudaStream_t>(0x9)};
  cudaMemsetAsync_v3020_params set{reinterpret_cast<void*>(0x2000), 0, 64, nullptr};
  cuMemcpyHtoDAsync_v2_params inside{0x1000, host, 16, reinterpret_cast<CUstream>(0x9)};
  hook_.answers = {LaunchLogged::sync_after, LaunchLogged::no};
  call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, CUPTI_API_ENTER,
       &copy, nullptr);
  call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, CUPTI_API_ENTER,
       &inside, nullptr);
  call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, CUPTI_API_EXIT,
       &inside, nullptr);
  EXPECT_EQ(hook_.done, 0);
  call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, CUPTI_API_EXIT,
       &copy, nullptr);
  EXPECT_EQ(hook_.done, 1) << "the sync after the copy, once it is issued";
  for (CUpti_ApiCallbackSite site : {CUPTI_API_ENTER, CUPTI_API_EXIT}) {
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, site, &set,
         nullptr);
  }
  ASSERT_EQ(hook_.copies.size(), 2u) << "the driver copy inside the runtime's is not offered";
  const SeenCopy& c = hook_.copies[0];
  EXPECT_EQ(c.dst, 0x1000u);
  EXPECT_EQ(c.src, reinterpret_cast<uint64_t>(host));
  EXPECT_EQ(c.bytes, 16u);
  EXPECT_FALSE(c.is_set);
  EXPECT_EQ(c.stream, reinterpret_cast<void*>(0x9));
  const SeenCopy& s = hook_.copies[1];
  EXPECT_EQ(s.dst, 0x2000u);
  EXPECT_EQ(s.bytes, 64u);
  EXPECT_TRUE(s.is_set);
  const std::map<std::string, uint64_t> unseen = take_unseen();
  ASSERT_EQ(unseen.size(), 1u);
  ASSERT_EQ(unseen.count("async copies and memsets"), 1u);
  EXPECT_EQ(unseen.at("async copies and memsets"), 1u) << "the memset the hook did not log";
}

// A replay's delay goes before a logged launch: the hook itself launches a kernel, through the
// runtime. That call is cprr's own and must not end the runtime call the hook was offered in.
TEST_F(UnseenWork, WhatTheHookLaunchesLeavesTheOfferingCallAsItWas) {
  struct Nested : Hook {
    std::function<void()> delay;
    static LaunchLogged offer_and_delay(void* user, const SeenLaunch& launch) {
      static_cast<Nested*>(user)->delay();  // the delay kernel, inside the hook
      return Hook::offer(user, launch);
    }
  } nested;
  nested.delay = [this] { runtime_launch("_Z5delayv", true); };
  nested.answers = {LaunchLogged::sync_after};
  set_launch_hook(LaunchHooks{&Nested::offer_and_delay, nullptr, &Hook::finished}, &nested);
  int done_before_runtime_exit = -1;
  runtime_launch("_Z4fillPf", true, [&] { done_before_runtime_exit = nested.done; });
  ASSERT_EQ(nested.offered.size(), 1u) << "the driver launch inside is still the logged one";
  EXPECT_EQ(nested.offered[0].kind, SeenLaunch::Handle::host_stub);
  EXPECT_EQ(done_before_runtime_exit, 0);
  EXPECT_EQ(nested.done, 1);
  EXPECT_TRUE(take_unseen().empty()) << "the delay kernel is not work outside the op log";
}

TEST_F(UnseenWork, WorkInsideASeenScopeIsNeitherOfferedNorCounted) {
  {
    SeenScope seen;
    runtime_launch("_Z4fillPf", true);
  }
  EXPECT_TRUE(hook_.offered.empty());
  EXPECT_TRUE(take_unseen().empty());
}

}  // namespace
}  // namespace cprr::python

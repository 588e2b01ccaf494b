// kernel_params' driver queries, with made-up queries in the driver's place (no GPU): which
// query answers for a handle of each kind, and when a handle launched as a CUfunction is asked
// as the CUkernel the runtime launched it as.
#include "python/native/capture/kernel_params.h"

#include <gtest/gtest.h>

#include <vector>

namespace cprr::python::capture {
namespace {

// A query whose handle is "valid" when it points at `kValid`: parameters of 8 bytes, two of them.
int kValid = 0;
std::vector<const void*> g_asked;

int layout(const void* handle, size_t index, size_t* offset, size_t* size) {
  if (handle != &kValid) return kInvalidHandle;
  if (index >= 2) return 1;  // CUDA_ERROR_INVALID_VALUE: past the last parameter
  *offset = 8 * index;
  *size = 8;
  return 0;
}

int refuses(const void* handle, size_t, size_t*, size_t*) {
  g_asked.push_back(handle);
  return kInvalidHandle;
}

int past_the_end(const void* handle, size_t, size_t*, size_t*) {
  g_asked.push_back(handle);
  return 1;
}

class ParamQuery : public ::testing::Test {
 protected:
  void SetUp() override { g_asked.clear(); }
  size_t offset = 0, size = 0;
};

TEST_F(ParamQuery, AFunctionHandleTheFunctionQueryRefusesIsAskedAsAKernel) {
  using H = SeenLaunch::Handle;
  EXPECT_EQ(param_query(&refuses, &layout, H::function, &kValid, 1, &offset, &size), 0);
  EXPECT_EQ(offset, 8u);
  EXPECT_EQ(size, 8u);
  EXPECT_EQ(g_asked, std::vector<const void*>{&kValid});
  EXPECT_EQ(param_query(&refuses, &layout, H::function, &kValid, 2, &offset, &size), 1);
}

TEST_F(ParamQuery, OnlyAnInvalidHandleIsAskedAgain) {
  using H = SeenLaunch::Handle;
  // Past the last parameter: the function query's answer stands.
  EXPECT_EQ(param_query(&past_the_end, &refuses, H::function, &kValid, 0, &offset, &size), 1);
  EXPECT_EQ(g_asked.size(), 1u);
}

TEST_F(ParamQuery, AKernelHandleIsNotAskedTwice) {
  using H = SeenLaunch::Handle;
  EXPECT_EQ(param_query(&refuses, &layout, H::kernel, &kValid, 0, &offset, &size), kInvalidHandle);
  EXPECT_EQ(g_asked.size(), 1u);
}

TEST_F(ParamQuery, WithoutAKernelQueryTheRefusalStands) {
  using H = SeenLaunch::Handle;
  EXPECT_EQ(param_query(&refuses, nullptr, H::function, &kValid, 0, &offset, &size),
            kInvalidHandle);
}

}  // namespace
}  // namespace cprr::python::capture

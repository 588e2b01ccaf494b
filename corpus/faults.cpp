// Fault fixtures for the harness itself: a library that floods stdout/stderr (seed 000), a rank
// that segfaults, a rank that throws before a collective, a rank that skips a collective. The
// last three expect crash/fail/hang: the run is green when the harness classifies them right and
// every other case still passes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/corpus_kernels.h"
#include "recorder/api/case.h"

namespace cprr {
namespace {

// Writes like a C library does: straight to the file descriptor, bypassing iostreams and stdio.
void flood(int fd, uint64_t bytes) {
  static const std::string line = "NCCL version 2.28.9+cuda13.0 (banner flood fixture)\n";
  std::string block;
  while (block.size() < 64 * 1024) block += line;
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::write(fd, block.data(), std::min<uint64_t>(block.size(), bytes - done));
    if (n <= 0) return;
    done += static_cast<uint64_t>(n);
  }
}

}  // namespace

// What NCCL prints at init with NCCL_DEBUG=VERSION, on fd 1 (stdout) as seed 000 describes,
// before the worker ever said hello.
CPRR_WORKER_INIT(nccl_style_banner) {
  const char msg[] = "NCCL version 2.28.9+cuda13.0\n";
  [[maybe_unused]] ssize_t a = ::write(1, msg, sizeof msg - 1);
  [[maybe_unused]] ssize_t b = ::write(2, msg, sizeof msg - 1);
}

CPRR_CASE(banner_flood, "healthy/banner_flood",
          {.world_sizes = {2, 4},
           .grid = {{"mib", {"100"}}},
           .description = "floods fd 1 and fd 2 between collectives; results must stay intact"}) {
  const uint64_t half = static_cast<uint64_t>(ctx.param_int("mib")) << 19;  // mib/2 MiB per fd
  const Buffer buf = ctx.alloc("data", 1 << 16);
  ctx.launch(ctx.stream(), "fill", (1 << 16) / 4,
             kernels::FillIota<int32_t>{buf.as<int32_t>(), ctx.rank()}, Access{{}, {buf}});
  flood(1, half / 2);
  ctx.all_reduce(ctx.stream(), buf, DType::i32);
  ctx.synchronize();
  flood(2, half);
  flood(1, half - half / 2);
  ctx.output("sum", buf, DType::i32);
  const std::vector<int32_t> sum = ctx.read<int32_t>(ctx.stream(), buf);
  const int w = ctx.world_size();
  CPRR_EXPECT(sum[5] == 5 * w + w * (w - 1) / 2, "sum corrupted: {}", sum[5]);
}

CPRR_CASE(segfault_rank, "bug/segfault_rank",
          {.world_sizes = {2, 4},
           .expect = Expect::crash,
           .description = "the last rank writes to a PROT_NONE page after one collective"}) {
  const Buffer buf = ctx.alloc("data", 1024);
  ctx.all_reduce(ctx.stream(), buf, DType::f32);
  ctx.synchronize();
  if (ctx.rank() == ctx.world_size() - 1) {
    std::fprintf(stderr, "rank %d: about to write to an inaccessible page\n", ctx.rank());
    std::fflush(stderr);
    // A PROT_NONE page rather than nullptr: some sandboxes map page 0, and the compiler may turn
    // a provable null store into a trap instead of a segfault.
    void* page = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int* volatile target = static_cast<int*>(page);
    *target = 42;
  }
  ctx.barrier(ctx.stream());
  ctx.synchronize();
}

CPRR_CASE(throw_before_collective, "fault/throw_before_collective",
          {.world_sizes = {2, 4},
           .expect = Expect::fail,
           .description = "the last rank throws between two all_reduces: its fail at once, the "
                          "others released from the second, not a hang"}) {
  const Buffer buf = ctx.alloc("data", 4096);
  ctx.launch(ctx.stream(), "fill", 4096 / 4, kernels::FillConst<float>{buf.as<float>(), 1.0f},
             Access{{}, {buf}});
  ctx.all_reduce(ctx.stream(), buf, DType::f32);
  ctx.synchronize();
  if (ctx.rank() == ctx.world_size() - 1) {
    throw std::runtime_error("the last rank found a bad shape after collective #0");
  }
  ctx.all_reduce(ctx.stream(), buf, DType::f32);
  ctx.synchronize();
}

CPRR_CASE(skip_collective, "bug/skip_collective",
          {.world_sizes = {2, 4},
           .expect = Expect::hang,
           .timeout_s = 3,
           .description = "the last rank skips the second all_reduce; the others wait forever"}) {
  const Buffer buf = ctx.alloc("data", 4096);
  ctx.all_reduce(ctx.stream(), buf, DType::f32);
  if (ctx.rank() != ctx.world_size() - 1) ctx.all_reduce(ctx.stream(), buf, DType::f32);
  ctx.synchronize();
}

}  // namespace cprr

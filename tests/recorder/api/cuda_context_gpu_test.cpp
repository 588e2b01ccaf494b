// The Case API on the cuda backend, in-process, in a world of one GPU: kernels launched as grids,
// read-back, device-side capture hashing that must equal the host definition, NCCL collectives
// through a communicator bootstrapped the way the controller does it. Skips without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kernels/corpus_kernels.h"
#include "kernels/hash.h"
#include "recorder/api/context.h"
#include "tests/recorder/scoped_env.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;

#define SKIP_WITHOUT_GPU()                                           \
  do {                                                               \
    std::string why_;                                                \
    if (visible_gpus(&why_) < 1) GTEST_SKIP() << "no GPU: " << why_; \
  } while (0)

// `got` holds first, first + 1, ... (FillIota's values), checked every `stride` and at the end.
void expect_iota(const std::vector<int32_t>& got, uint64_t n, int32_t first, uint64_t stride) {
  ASSERT_EQ(got.size(), n);
  for (uint64_t i = 0; i < n; i += stride) ASSERT_EQ(got[i], first + static_cast<int32_t>(i)) << i;
  EXPECT_EQ(got[n - 1], first + static_cast<int32_t>(n - 1));
}

RankState make_cuda_state() {
  RankState s;
  s.backend = make_backend(BackendConfig{BackendKind::cuda, 0, 1, ""});
  s.backend->connect(
      ConnectSpec{s.backend->bootstrap_id()});  // what World does with rank 0's hello
  for (MemPool pool : {MemPool::device, MemPool::symmetric, MemPool::host}) {
    s.engines[static_cast<int>(pool)] = std::make_unique<PlacementEngine>(
        s.backend->arena_capacity(pool), 256, Placement::best_fit);
  }
  return s;
}

TEST(CudaContext, TheDeviceArenaIsAllocatedForTheFirstCaseAndSaysWhatToLowerWhenItDoesNotFit) {
  SKIP_WITHOUT_GPU();
  const test::ScopedEnv arena("CPRR_CUDA_DEVICE_MIB", "100000000");  // 95 TiB: no GPU has it
  // Start-up does not allocate it (a standby world waiting for its case holds none).
  const auto backend = make_backend(BackendConfig{BackendKind::cuda, 0, 1, ""});
  EXPECT_EQ(backend->arena_capacity(MemPool::device), uint64_t{100000000} << 20);
  try {
    backend->prepare_arenas();
    ADD_FAILURE() << "a 95 TiB arena was allocated";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot allocate the 100000000 MiB device arena on GPU 0"));
    EXPECT_THAT(e.what(), HasSubstr("lower --standby"));
    EXPECT_THAT(e.what(), HasSubstr("CPRR_CUDA_DEVICE_MIB"));
  }
}

// The device arena's default is 8 GiB per GPU: ranks sharing one divide it, so a world holds the
// same device memory per GPU whatever its size. An explicit size is taken as it is.
TEST(CudaContext, TheDefaultDeviceArenaIsDividedAmongTheRanksSharingAGpu) {
  SKIP_WITHOUT_GPU();
  const int gpus = visible_gpus();
  if (::getenv("CPRR_CUDA_DEVICE_MIB") != nullptr) {
    GTEST_SKIP() << "CPRR_CUDA_DEVICE_MIB is set, so the default is not used";
  }
  const auto mib = [](int world_size) {
    return make_backend(BackendConfig{BackendKind::cuda, 0, world_size, ""})
               ->arena_capacity(MemPool::device) >>
           20;
  };
  EXPECT_EQ(mib(1), 8192u);
  EXPECT_EQ(mib(4), 8192u / static_cast<uint64_t>((4 + gpus - 1) / gpus));
  EXPECT_EQ(mib(4 * gpus), 2048u);  // four ranks on every GPU
  const test::ScopedEnv arena("CPRR_CUDA_DEVICE_MIB", "3000");
  EXPECT_EQ(mib(4 * gpus), 3000u);
}

TEST(CudaContext, StartUpStepsAreTimedInOrder) {
  SKIP_WITHOUT_GPU();
  auto backend = make_backend(BackendConfig{BackendKind::cuda, 0, 1, ""});
  std::vector<std::string> names;
  for (const StartupPhase& p : backend->take_startup_phases()) names.push_back(p.name);
  // The pinned host arena is no step: it is made at its first use, once.
  EXPECT_THAT(names, ::testing::ElementsAre("cuda context", "streams"));
  std::byte* const host = backend->arena_base(MemPool::host);
  EXPECT_NE(host, nullptr);
  EXPECT_EQ(backend->arena_base(MemPool::host), host);
  backend->connect(ConnectSpec{backend->bootstrap_id()});
  names.clear();
  for (const StartupPhase& p : backend->take_startup_phases()) names.push_back(p.name);
  // Connecting only starts the communicator; the symmetric pool waits for its first use.
  EXPECT_THAT(names, ::testing::ElementsAre("nccl communicator (started)"));
  EXPECT_THAT(backend->symmetric_pool(), ::testing::HasSubstr("not made"));
  EXPECT_TRUE(backend->take_first_use_phases().empty());
  EXPECT_NE(backend->arena_base(MemPool::symmetric), nullptr);
  names.clear();
  for (const StartupPhase& p : backend->take_first_use_phases()) names.push_back(p.name);
  EXPECT_THAT(names, ::testing::ElementsAre("nccl communicator (waited for)", "symmetric arena",
                                            "symmetric window"));
  EXPECT_THAT(backend->symmetric_pool(), ::testing::HasSubstr("NCCL window"));
  EXPECT_NE(backend->native_comm(), nullptr);
  EXPECT_TRUE(backend->take_first_use_phases().empty()) << "made once";
}

TEST(CudaContext, TheHostPoolStartsZeroAndKernelsAndCopiesReachItThroughItsAddresses) {
  SKIP_WITHOUT_GPU();
  RankState st = make_cuda_state();
  Context ctx(st, "gpu/host_pool", {}, 1, Placement::best_fit);
  const uint64_t n = (uint64_t{8} << 20) / 4;  // 8 MiB: several huge pages of the host arena
  const Buffer h = ctx.alloc("h", n * 4, MemPool::host);
  const Buffer d = ctx.alloc("d", n * 4);
  const std::vector<int32_t> fresh = ctx.read<int32_t>(ctx.stream(), h);
  EXPECT_EQ(std::count(fresh.begin(), fresh.end(), 0), static_cast<std::ptrdiff_t>(n))
      << "a new rank's host arena is not zero";
  // A kernel writes the pinned host memory through its host address, a copy takes it to the
  // device, and the device buffer reads back what the kernel wrote.
  ctx.launch(ctx.stream(), "iota_host", n, kernels::FillIota<int32_t>{h.as<int32_t>(), 11},
             Access{{}, {h}});
  ctx.copy(ctx.stream(), d, h);
  expect_iota(ctx.read<int32_t>(ctx.stream(), d), n, 11, 4099);
  ctx.drain();
  ctx.finish();
}

TEST(CudaContext, KernelRunsOnTheDeviceAndReadsBack) {
  SKIP_WITHOUT_GPU();
  RankState st = make_cuda_state();
  Context ctx(st, "gpu/iota", {}, 1, Placement::best_fit);
  const uint64_t n = 100003;  // not a multiple of the block size
  const Buffer b = ctx.alloc("b", n * 4);
  ctx.launch(ctx.stream(), "iota", n, kernels::FillIota<int32_t>{b.as<int32_t>(), 7},
             Access{{}, {b}});
  expect_iota(ctx.read<int32_t>(ctx.stream(), b), n, 7, 997);
  ctx.drain();
  ctx.finish();
}

TEST(CudaContext, CapturesHashedOnTheDeviceMatchTheHostDefinition) {
  SKIP_WITHOUT_GPU();
  RankState st = make_cuda_state();
  Context ctx(st, "gpu/capture", {}, 1, Placement::best_fit);
  const Stream side = ctx.create_stream("side");
  const std::vector<uint64_t> sizes = {0, 16, kRawCaptureLimit, 3 * kHashChunkBytes + 17};
  std::vector<Buffer> bufs;
  for (uint64_t bytes : sizes) {
    bufs.push_back(ctx.alloc("b", std::max<uint64_t>(bytes, 1)).slice(0, bytes));
    ctx.launch(side, "fill", bytes, kernels::FillRandom<uint8_t>{bufs.back().as<uint8_t>(), bytes},
               Access{{}, {bufs.back()}});
    ctx.output("out", bufs.back(), DType::u8, {}, side);
  }
  ctx.probe("odd_slice", bufs.back().slice(3, 70001), DType::u8, side);  // unaligned start
  std::vector<std::vector<uint8_t>> host;
  for (const Buffer& b : bufs) host.push_back(ctx.read<uint8_t>(side, b));
  ctx.drain();
  const CaseCapture cap = ctx.finish();
  ASSERT_EQ(cap.outputs.size(), sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(cap.outputs[i].digest, hash_buffer(host[i].data(), host[i].size())) << sizes[i];
    if (sizes[i] <= kRawCaptureLimit) {
      EXPECT_EQ(cap.outputs[i].raw, std::string(host[i].begin(), host[i].end())) << sizes[i];
    } else {
      EXPECT_TRUE(cap.outputs[i].raw.empty());
    }
  }
  ASSERT_EQ(cap.probes.size(), 1u);
  EXPECT_EQ(cap.probes[0].digest, hash_buffer(host.back().data() + 3, 70001));
}

TEST(CudaContext, ManySmallCapturesOverflowTheFirstStagingBlockWithoutLoss) {
  SKIP_WITHOUT_GPU();
  RankState st = make_cuda_state();
  for (int round = 0; round < 2; ++round) {  // the second case reuses the chained blocks
    Context ctx(st, "gpu/many", {}, 1, Placement::best_fit);
    const Buffer b = ctx.alloc("b", kRawCaptureLimit * 600);
    ctx.launch(ctx.stream(), "fill", b.bytes,
               kernels::FillRandom<uint8_t>{b.as<uint8_t>(), 9u + round}, Access{{}, {b}});
    for (int i = 0; i < 600; ++i) {  // 600 x 4 KiB raw bytes: beyond the first 1 MiB block
      ctx.probe("p", b.slice(i * kRawCaptureLimit, kRawCaptureLimit), DType::u8);
    }
    const std::vector<uint8_t> host = ctx.read<uint8_t>(ctx.stream(), b);
    ctx.drain();
    const CaseCapture cap = ctx.finish();
    ASSERT_EQ(cap.probes.size(), 600u);
    for (int i = 0; i < 600; i += 37) {
      const uint8_t* at = host.data() + i * kRawCaptureLimit;
      EXPECT_EQ(cap.probes[i].digest, hash_buffer(at, kRawCaptureLimit)) << i;
      EXPECT_EQ(cap.probes[i].raw, std::string(at, at + kRawCaptureLimit)) << i;
    }
  }
}

TEST(CudaContext, HostOnlyKernelIsACaseFailureNamingIt) {
  SKIP_WITHOUT_GPU();
  RankState st = make_cuda_state();
  Context ctx(st, "gpu/lambda", {}, 1, Placement::best_fit);
  const Buffer b = ctx.alloc("b", 64);
  try {
    ctx.launch(
        ctx.stream(), "host_lambda", 1, [](uint64_t) {}, Access{{}, {b}});
    ADD_FAILURE() << "a host lambda was launched on the cuda backend";
  } catch (const CaseFailure& e) {
    EXPECT_THAT(e.what(), HasSubstr("host_lambda"));
    EXPECT_THAT(e.what(), HasSubstr("no device build"));
  }
}

TEST(CudaContext, CollectivesRunThroughNcclAndAreLogged) {
  SKIP_WITHOUT_GPU();
  RankState st = make_cuda_state();
  Context ctx(st, "gpu/collectives", {}, 1, Placement::best_fit);
  const Buffer in = ctx.alloc("in", 4096 * 4);
  const Buffer out = ctx.alloc("out", 4096 * 4);
  const Buffer sym = ctx.alloc("sym", 4096 * 4, MemPool::symmetric);
  ctx.launch(ctx.stream(), "fill", 4096, kernels::FillIota<int32_t>{in.as<int32_t>(), 1},
             Access{{}, {in}});
  ctx.launch(ctx.stream(), "fill_sym", 4096, kernels::FillConst<int32_t>{sym.as<int32_t>(), 5},
             Access{{}, {sym}});
  ctx.all_reduce(ctx.stream(), in, DType::i32);
  ctx.all_reduce(ctx.stream(), sym, DType::i32, ReduceOp::max);
  ctx.all_gather(ctx.stream(), in, out, DType::i32);
  ctx.all_to_all_v(ctx.stream(), in, {4096}, out, {4096}, DType::i32);
  ctx.broadcast(ctx.stream(), out, DType::i32, 0);
  ctx.barrier(ctx.stream());
  const std::vector<int32_t> got = ctx.read<int32_t>(ctx.stream(), out);
  const std::vector<int32_t> s = ctx.read<int32_t>(ctx.stream(), sym);
  for (int i = 0; i < 4096; i += 511) EXPECT_EQ(got[i], 1 + i) << i;
  EXPECT_EQ(s[4095], 5);
  const CollectiveProgress p = st.backend->collective_progress();
  EXPECT_EQ(p.completed_seq, 5);
  EXPECT_EQ(p.completed_kind, "barrier");
  EXPECT_TRUE(st.backend->running_ops().empty());
  ctx.drain();
  const CaseCapture cap = ctx.finish();
  ASSERT_EQ(cap.collectives.size(), 6u);
  EXPECT_EQ(cap.collectives[3].kind, "all_to_all_v");
}

TEST(CudaContext, EventsOrderAConsumerStreamAfterItsProducer) {
  SKIP_WITHOUT_GPU();
  RankState st = make_cuda_state();
  Context ctx(st, "gpu/events", {}, 1, Placement::best_fit);
  const Stream producer = ctx.create_stream("producer");
  const Stream consumer = ctx.create_stream("consumer");
  const uint64_t n = uint64_t{1} << 24;  // long enough that an unordered consumer would lose
  const Buffer x = ctx.alloc("x", n * 4), y = ctx.alloc("y", n * 4), z = ctx.alloc("z", n * 4);
  ctx.launch(producer, "x", n, kernels::FillConst<float>{x.as<float>(), 2.0f}, Access{{}, {x}});
  ctx.launch(producer, "y", n, kernels::FillConst<float>{y.as<float>(), 3.0f}, Access{{}, {y}});
  ctx.wait(consumer, ctx.record(producer));
  ctx.launch(consumer, "axpy", n, kernels::Axpy{z.as<float>(), x.as<float>(), y.as<float>(), 4.0f},
             Access{{x, y}, {z}});
  const std::vector<float> got = ctx.read<float>(consumer, z);
  EXPECT_EQ(got[0], 11.0f);
  EXPECT_EQ(got[n - 1], 11.0f);
}

}  // namespace
}  // namespace cprr

namespace cprr {
namespace {

// Race amplification on the device: a replay's delay before a stream op (the spin kernel) lets an
// unordered op on another stream overtake it, so the later-issued write lands first and the
// delayed one last.
TEST(CudaContext, ADelayBeforeAStreamOpLetsAnUnorderedOpOnAnotherStreamOvertakeIt) {
  SKIP_WITHOUT_GPU();
  for (const bool delayed : {false, true}) {
    RankState st = make_cuda_state();
    Perturbation p;
    if (delayed) {
      p.delay_ops = {OpSite{0, 2}};  // op #2: the side stream's fill (after #0 zero, #1 sync)
      p.target_delay_us = 50'000;
    }
    Context ctx(st, "gpu/overtake", {}, 1, Placement::best_fit, 1, p);
    const Stream side = ctx.create_stream("side");
    const uint64_t n = 1 << 16;
    const Buffer b = ctx.alloc("b", n * 4);
    ctx.launch(ctx.stream(), "zero", n, kernels::FillConst<int32_t>{b.as<int32_t>(), 0},
               Access{{}, {b}});
    ctx.synchronize();
    // Issued first on the side stream, then on the default stream, unordered: without a delay
    // the side write usually lands first; with one it must land last.
    ctx.launch(side, "side writes 1", n, kernels::FillConst<int32_t>{b.as<int32_t>(), 1},
               Access{{}, {b}});
    ctx.launch(ctx.stream(), "default writes 2", n, kernels::FillConst<int32_t>{b.as<int32_t>(), 2},
               Access{{}, {b}});
    ctx.synchronize();
    const std::vector<int32_t> got = ctx.read<int32_t>(ctx.stream(), b);
    if (delayed) {
      EXPECT_EQ(got.front(), 1) << "the delayed side write must land last";
      EXPECT_EQ(got.back(), 1);
    }
    ctx.drain();
    ctx.finish();
  }
}

}  // namespace
}  // namespace cprr

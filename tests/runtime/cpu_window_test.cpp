// The CPU backend's one-sided window: every rank's symmetric pool and semaphore table are shared
// memory its peers map, so a put lands in the peer's pool and a signal releases the peer's wait.
// Ranks are threads here, each with its own CpuBackend, as rank processes would have.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cpu_backend.h"
#include "runtime/error.h"
#include "runtime/host_info.h"

namespace cprr {
namespace {

/// Runs `body(backend)` on two ranks (threads) sharing a fresh rendezvous directory; rethrows the
/// first rank's exception on the test thread and removes the directory afterwards.
void run_pair(const std::function<void(CpuBackend&, int rank)>& body) {
  std::string dir = "/tmp/cprr-window-test-XXXXXX";
  CPRR_CHECK(mkdtemp(dir.data()) != nullptr, "mkdtemp {}: {}", dir, std::strerror(errno));
  std::vector<std::exception_ptr> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        CpuBackend backend(BackendConfig{BackendKind::cpu, r, 2, dir});
        body(backend, r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : ranks) t.join();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

TEST(CpuWindow, APutLandsInThePeersPoolAndItsSignalReleasesThePeersWait) {
  constexpr uint64_t kOffset = 4096, kCount = 1000;
  run_pair([&](CpuBackend& b, int rank) {
    auto* mine = reinterpret_cast<uint32_t*>(b.arena_base(MemPool::symmetric) + kOffset);
    if (rank == 0) {
      auto* src = reinterpret_cast<uint32_t*>(b.arena_base(MemPool::device));
      for (uint64_t i = 0; i < kCount; ++i) src[i] = static_cast<uint32_t>(i * 7 + 1);
      b.delay(0, 20'000);  // the peer's wait is already queued when the put runs
      b.put(0, 1, kOffset, src, kCount * 4);
      b.signal(0, 1, /*slot=*/3, /*value=*/(uint64_t{5} << 32) | 1);
      b.synchronize_all();
      EXPECT_EQ(mine[0], 0u) << "rank 0's own pool is untouched";
    } else {
      b.wait_signal(0, 3, (uint64_t{5} << 32) | 1);
      b.synchronize_all();
      for (uint64_t i = 0; i < kCount; ++i) ASSERT_EQ(mine[i], i * 7 + 1) << "element " << i;
    }
  });
}

// An all-gather into a symmetric buffer writes each rank's chunk at *its own* offset of the
// output in every window, as NCCL's symmetric kernels do: with the same layout on both ranks it
// gathers; with the output placed elsewhere on rank 1, rank 0's chunk misses rank 1's output.
std::vector<std::vector<int32_t>> symmetric_gather(uint64_t rank1_offset) {
  constexpr uint64_t kCount = 64, kOffset = 8192;
  std::vector<std::vector<int32_t>> got(2);
  run_pair([&](CpuBackend& b, int rank) {
    std::byte* sym = b.arena_base(MemPool::symmetric);
    auto* in = reinterpret_cast<int32_t*>(b.arena_base(MemPool::device));
    for (uint64_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>(100 * (rank + 1) + i);
    auto* out = reinterpret_cast<int32_t*>(sym + (rank == 1 ? rank1_offset : kOffset));
    std::fill_n(out, 2 * kCount, 0);
    CollectiveCall call{
        .kind = "all_gather", .dtype = DType::i32, .in = in, .out = out, .count = kCount};
    b.collective(0, call);
    b.synchronize_all();
    got[rank].assign(out, out + 2 * kCount);
  });
  return got;
}

TEST(CpuWindow, ASymmetricAllGatherGathersWhenTheLayoutsAgreeAndNotWhenTheyDiffer) {
  const auto same = symmetric_gather(8192);
  for (int r = 0; r < 2; ++r) {
    for (uint64_t i = 0; i < 64; ++i) {
      ASSERT_EQ(same[r][i], static_cast<int32_t>(100 + i)) << "rank " << r << " element " << i;
      ASSERT_EQ(same[r][64 + i], static_cast<int32_t>(200 + i))
          << "rank " << r << " element " << 64 + i;
    }
  }
  const auto moved = symmetric_gather(8192 + 4096);
  EXPECT_EQ(moved[1][0], 0) << "rank 0's chunk went to rank 0's offset in rank 1's window";
  EXPECT_EQ(moved[1][64], 200) << "rank 1 still writes its own chunk into its own output";
  EXPECT_EQ(moved[0][0], 100);
  EXPECT_EQ(moved[0][64], 0) << "rank 1's chunk went to rank 1's offset in rank 0's window";
}

// A cpu rank names its host as its device: the controller refuses a cpu world over two hosts
// (runtime/transport_choice), since this window is files every rank maps.
TEST(CpuWindow, EachRankNamesItsHostAsItsDevice) {
  // One rank alone: a pair whose ranks return at once may close before the other connected.
  const CpuBackend backend(BackendConfig{BackendKind::cpu, 0, 1, ""});
  EXPECT_EQ(backend.device_identity(), host_name());
}

TEST(CpuWindow, AWaitForALaterEpochIsNotReleasedByAnEarlierSignal) {
  std::atomic<bool> epoch_one_sent{false}, checked{false};
  run_pair([&](CpuBackend& b, int rank) {
    if (rank == 0) {
      b.signal(0, 1, 0, 1);  // epoch 1 only
      b.synchronize_all();
      epoch_one_sent = true;
      while (!checked) std::this_thread::yield();
      b.signal(0, 1, 0, 2);
      b.synchronize_all();
    } else {
      b.wait_signal(0, 0, 2);
      while (!epoch_one_sent) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // why: a wrong release's window
      // Still blocked: the watchdog view names the wait.
      const auto running = b.running_ops();
      ASSERT_EQ(running.size(), 1u);
      EXPECT_NE(running[0].find("wait_signal slot 0"), std::string::npos) << running[0];
      checked = true;
      b.synchronize_all();
    }
  });
}

}  // namespace
}  // namespace cprr

#include "runtime/gloo_comm.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.h"

namespace cprr {
namespace {

using namespace std::chrono_literals;

/// A fresh rendezvous directory under /tmp, removed with everything in it afterwards.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/cprr-gloo-test-XXXXXX";
    CPRR_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp {}: {}", tmpl, std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;  // best-effort cleanup; a leftover dir must not fail the test
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Runs `body` on `world` ranks, one thread each, every one with its own GlooComm over a fresh
/// rendezvous directory; rethrows the first rank's exception on the test thread.
void run_world(int world, const std::function<void(GlooComm&)>& body) {
  TempDir dir;
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      try {
        GlooComm comm(r, world, dir.path(), 10s);
        EXPECT_EQ(comm.rank(), r);
        EXPECT_EQ(comm.size(), world);
        body(comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

class GlooCommTest : public ::testing::TestWithParam<int> {
 protected:
  int world() const { return GetParam(); }
};

// Multiples of 0.5 well below 2^24: every partial sum is exact in f32, in any order.
float f32_value(int rank, std::size_t i) { return 0.5f * static_cast<float>(rank + 1) + i; }
// Beyond 32 bits and of both signs, so truncation or a wrong type would show.
int64_t i64_value(int rank, std::size_t i) {
  return (static_cast<int64_t>(rank) - 1) * 3'000'000'000LL * static_cast<int64_t>(i + 1) + rank;
}

template <class T, class Value, class Combine>
std::vector<T> expected_reduction(int world, std::size_t count, Value value, Combine combine) {
  std::vector<T> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    T acc = value(0, i);
    for (int r = 1; r < world; ++r) acc = combine(acc, value(r, i));
    out[i] = acc;
  }
  return out;
}

template <class T, class Value>
void check_all_reduce(GlooComm& comm, DType dtype, Value value, uint32_t first_tag) {
  // 37 does not split evenly over the ring, so partial chunks are exercised too.
  constexpr std::size_t kCount = 37;
  struct Case {
    ReduceOp op;
    std::function<T(T, T)> combine;
  };
  const Case cases[] = {{ReduceOp::sum, [](T a, T b) { return a + b; }},
                        {ReduceOp::max, [](T a, T b) { return std::max(a, b); }},
                        {ReduceOp::min, [](T a, T b) { return std::min(a, b); }}};
  uint32_t tag = first_tag;
  for (const Case& c : cases) {
    std::vector<T> buf(kCount);
    for (std::size_t i = 0; i < kCount; ++i) buf[i] = value(comm.rank(), i);
    comm.all_reduce(buf.data(), kCount, dtype, c.op, tag++);
    EXPECT_EQ(buf, expected_reduction<T>(comm.size(), kCount, value, c.combine))
        << reduce_op_name(c.op) << " " << dtype_name(dtype) << " on rank " << comm.rank();
  }
}

TEST_P(GlooCommTest, AllReduceSumMaxMinF32AndI64) {
  run_world(world(), [](GlooComm& comm) {
    check_all_reduce<float>(comm, DType::f32, f32_value, 1);
    check_all_reduce<int64_t>(comm, DType::i64, i64_value, 10);
  });
}

TEST_P(GlooCommTest, AllReduceSumOtherDtypes) {
  run_world(world(), [](GlooComm& comm) {
    const int w = comm.size();
    std::vector<uint8_t> u8{static_cast<uint8_t>(comm.rank() + 1), 100};
    comm.all_reduce(u8.data(), u8.size(), DType::u8, ReduceOp::sum, 1);
    EXPECT_EQ(u8, (std::vector<uint8_t>{static_cast<uint8_t>(w * (w + 1) / 2),
                                        static_cast<uint8_t>(100 * w)}));
    std::vector<int32_t> i32{-comm.rank(), 1 << 20};
    comm.all_reduce(i32.data(), i32.size(), DType::i32, ReduceOp::min, 2);
    EXPECT_EQ(i32, (std::vector<int32_t>{-(w - 1), 1 << 20}));
    std::vector<double> f64{0.25 * comm.rank(), 1e300};
    comm.all_reduce(f64.data(), f64.size(), DType::f64, ReduceOp::max, 3);
    EXPECT_EQ(f64, (std::vector<double>{0.25 * (w - 1), 1e300}));
  });
}

TEST_P(GlooCommTest, AllReduceIsBitIdenticalAcrossRanksAndRuns) {
  // Values whose f32 sums round, so any change of reduction order would change bits.
  constexpr std::size_t kCount = 1001;
  auto run_once = [&] {
    std::vector<std::vector<float>> results(world());
    run_world(world(), [&](GlooComm& comm) {
      std::vector<float> buf(kCount);
      for (std::size_t i = 0; i < kCount; ++i) {
        buf[i] = 1.0f / static_cast<float>(3 + i + 7 * comm.rank()) + 1e4f * (comm.rank() % 2);
      }
      comm.all_reduce(buf.data(), kCount, DType::f32, ReduceOp::sum, 7);
      results[comm.rank()] = buf;
    });
    return results;
  };
  const auto first = run_once();
  const auto second = run_once();
  for (int r = 0; r < world(); ++r) {
    ASSERT_EQ(std::memcmp(first[r].data(), first[0].data(), kCount * sizeof(float)), 0)
        << "rank " << r << " disagrees with rank 0";
    ASSERT_EQ(std::memcmp(first[r].data(), second[r].data(), kCount * sizeof(float)), 0)
        << "rank " << r << " differs between runs";
  }
}

TEST_P(GlooCommTest, AllGatherConcatenatesInRankOrder) {
  run_world(world(), [](GlooComm& comm) {
    constexpr std::size_t kCount = 5;
    std::vector<int32_t> in(kCount);
    for (std::size_t j = 0; j < kCount; ++j) in[j] = comm.rank() * 1000 + static_cast<int>(j);
    std::vector<int32_t> out(kCount * comm.size(), -1);
    comm.all_gather(in.data(), out.data(), kCount, DType::i32, 3);
    for (int r = 0; r < comm.size(); ++r) {
      for (std::size_t j = 0; j < kCount; ++j) {
        EXPECT_EQ(out[r * kCount + j], r * 1000 + static_cast<int>(j))
            << "rank " << comm.rank() << " slot " << r << "/" << j;
      }
    }
  });
}

/// Element k of the chunk `from` sends to `to`: identifies sender, receiver and position.
int64_t a2a_value(int from, int to, int64_t k) { return from * 1'000'000LL + to * 1'000LL + k; }

/// Runs one all_to_all_v where rank `from` sends counts(from, to) elements to rank `to`, and
/// checks every received element. Empty buffers are passed as nullptr, as callers may.
void check_all_to_all_v(GlooComm& comm, const std::function<int64_t(int, int)>& counts,
                        uint32_t tag) {
  const int me = comm.rank();
  const int w = comm.size();
  std::vector<int64_t> send_counts(w), recv_counts(w);
  std::vector<int64_t> in;
  for (int to = 0; to < w; ++to) {
    send_counts[to] = counts(me, to);
    recv_counts[to] = counts(to, me);
    for (int64_t k = 0; k < send_counts[to]; ++k) in.push_back(a2a_value(me, to, k));
  }
  int64_t recv_total = 0;
  for (int64_t c : recv_counts) recv_total += c;
  std::vector<int64_t> out(recv_total, -1);
  comm.all_to_all_v(in.empty() ? nullptr : in.data(), send_counts,
                    out.empty() ? nullptr : out.data(), recv_counts, DType::i64, tag);
  std::size_t pos = 0;
  for (int from = 0; from < w; ++from) {
    for (int64_t k = 0; k < recv_counts[from]; ++k, ++pos) {
      EXPECT_EQ(out[pos], a2a_value(from, me, k))
          << "rank " << me << " element " << pos << " (expected from " << from << " #" << k << ")";
    }
  }
}

TEST_P(GlooCommTest, AllToAllVWithUnevenAndZeroSplits) {
  run_world(world(), [](GlooComm& comm) {
    // Uneven, with zero-sized chunks (including some to self): (from + 2*to) % 3.
    check_all_to_all_v(
        comm, [](int from, int to) { return (from + 2 * to) % 3; }, 5);
    // Rank 0 sends and receives nothing at all (null buffers); the others exchange.
    check_all_to_all_v(
        comm, [](int from, int to) { return from == 0 || to == 0 ? 0 : from + to; }, 6);
    // Everything empty.
    check_all_to_all_v(
        comm, [](int, int) { return 0; }, 7);
  });
}

TEST_P(GlooCommTest, BroadcastFromNonZeroRoot) {
  run_world(world(), [](GlooComm& comm) {
    const int root = comm.size() - 1;
    std::vector<float> buf(9, -1.0f);
    if (comm.rank() == root) {
      for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = 1.5f * i + 0.25f;
    }
    comm.broadcast(buf.data(), buf.size(), DType::f32, root, 4);
    for (std::size_t i = 0; i < buf.size(); ++i) {
      EXPECT_EQ(buf[i], 1.5f * i + 0.25f) << "rank " << comm.rank() << " element " << i;
    }
  });
}

TEST_P(GlooCommTest, BarrierWaitsForEveryRank) {
  std::atomic<int> arrived{0};
  run_world(world(), [&](GlooComm& comm) {
    // The last rank is late: nobody may leave the barrier before it arrived.
    // (A broken barrier shows in this lateness; a correct one passes however late it comes.)
    if (comm.rank() == comm.size() - 1) std::this_thread::sleep_for(50ms);  // why: the lateness
    ++arrived;
    comm.barrier(8);
    EXPECT_EQ(arrived.load(), comm.size()) << "rank " << comm.rank() << " left the barrier early";
  });
}

TEST_P(GlooCommTest, ZeroCountCollectivesReturn) {
  run_world(world(), [](GlooComm& comm) {
    comm.all_reduce(nullptr, 0, DType::f32, ReduceOp::sum, 1);
    comm.all_gather(nullptr, nullptr, 0, DType::i64, 2);
    comm.broadcast(nullptr, 0, DType::u8, 0, 3);
    // The communicator still works afterwards.
    int32_t x = comm.rank();
    comm.all_reduce(&x, 1, DType::i32, ReduceOp::max, 4);
    EXPECT_EQ(x, comm.size() - 1);
  });
}

TEST_P(GlooCommTest, MessagesGoToTheirPeerByTagBesideCollectivesOfTheSameTag) {
  run_world(world(), [](GlooComm& comm) {
    // A ring (even worlds): even ranks send first, odd ranks receive first, since a send returns
    // only once its recv took it. Tags 0 and 1 go each to the recv of its tag, and an all-reduce
    // of tag 0 in between meets no message.
    const int me = comm.rank(), w = comm.size();
    const int right = (me + 1) % w, left = (me + w - 1) % w;
    std::vector<int64_t> first(5, 100 * me + 1), second(5, 100 * me + 2), a(5), b(5);
    const auto send_both = [&] {
      comm.send(first.data(), first.size(), DType::i64, right, 0);
      comm.send(second.data(), second.size(), DType::i64, right, 1);
    };
    const auto recv_both = [&] {
      comm.recv(a.data(), a.size(), DType::i64, left, 0);
      comm.recv(b.data(), b.size(), DType::i64, left, 1);
    };
    int32_t x = 1;
    if (me % 2 == 0) {
      send_both();
      comm.all_reduce(&x, 1, DType::i32, ReduceOp::sum, 0);
      recv_both();
    } else {
      recv_both();
      comm.all_reduce(&x, 1, DType::i32, ReduceOp::sum, 0);
      send_both();
    }
    EXPECT_EQ(a, std::vector<int64_t>(5, 100 * left + 1)) << "rank " << me;
    EXPECT_EQ(b, std::vector<int64_t>(5, 100 * left + 2)) << "rank " << me;
    EXPECT_EQ(x, w);
  });
}

TEST(GlooComm, AMessageToItselfOrOutsideTheWorldIsRefused) {
  run_world(2, [](GlooComm& comm) {
    int32_t x = 0;
    EXPECT_THROW(comm.send(&x, 1, DType::i32, comm.rank(), 0), Error);
    EXPECT_THROW(comm.recv(&x, 1, DType::i32, 2, 0), Error);
    // Neither rank leaves before both connected: a context closed while its peer is still in
    // the rendezvous fails that peer's ("connection closed by peer").
    comm.barrier(1);
  });
}

INSTANTIATE_TEST_SUITE_P(GlooWorlds, GlooCommTest, ::testing::Values(2, 4),
                         [](const auto& info) { return "W" + std::to_string(info.param); });

TEST(GlooComm, SingleRankWorldCopiesLocally) {
  run_world(1, [](GlooComm& comm) {
    int64_t x = 42;
    comm.all_reduce(&x, 1, DType::i64, ReduceOp::sum, 1);
    EXPECT_EQ(x, 42);
    int64_t gathered = 0;
    comm.all_gather(&x, &gathered, 1, DType::i64, 2);
    EXPECT_EQ(gathered, 42);
    int64_t received = 0;
    comm.all_to_all_v(&x, {1}, &received, {1}, DType::i64, 3);
    EXPECT_EQ(received, 42);
    comm.broadcast(&x, 1, DType::i64, 0, 4);
    comm.barrier(5);
  });
}

TEST(GlooComm, NonexistentRendezvousDirThrowsError) {
  const std::string dir = "/nonexistent/cprr-gloo-test-no-such-dir";
  try {
    GlooComm comm(0, 2, dir, 500ms);
    FAIL() << "GlooComm connected through a missing directory";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(dir), std::string::npos) << what;
    EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
  }
}

TEST(GlooComm, MissingPeerTimesOutWithError) {
  TempDir dir;
  try {                                      // without the timeout it would wait for rank 1 forever
    GlooComm comm(0, 2, dir.path(), 300ms);  // rank 1 never shows up
    FAIL() << "GlooComm connected without its peer";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(dir.path()), std::string::npos) << what;
    EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
  }
}

TEST(GlooComm, InvalidArgumentsThrowError) {
  TempDir dir;
  EXPECT_THROW(GlooComm(2, 2, dir.path(), 1s), Error);
  EXPECT_THROW(GlooComm(0, 1, dir.path(), 0ms), Error);
}

}  // namespace
}  // namespace cprr

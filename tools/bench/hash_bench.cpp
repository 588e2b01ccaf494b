// Hash benchmark: cprr::hash_buffer (chunked XXH3, kernels/hash.h) against memcpy of the same
// buffer, measured in one run so the ratio is meaningful on a shared machine. Best of several
// repetitions. Prints figures; asserts nothing.
//
//   cprr_bench_hash [--mib N] [--reps N]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "kernels/hash.h"
#include "tools/bench/timing.h"

using cprr::bench::best_seconds;

int main(int argc, char** argv) {
  std::size_t mib = 256;
  int reps = 5;
  CLI::App app{"cprr hash benchmark: hash_buffer GB/s against memcpy GB/s on one buffer"};
  app.add_option("--mib", mib, "buffer size in MiB")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "repetitions; the best one counts")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const std::size_t bytes = mib << 20;
  const std::size_t words = bytes / sizeof(uint64_t);
  // Random contents (so nothing is special-cased), every page of both buffers touched beforehand.
  std::unique_ptr<uint64_t[]> src(new uint64_t[words]);
  std::unique_ptr<uint64_t[]> dst(new uint64_t[words]);
  std::mt19937_64 rng(42);
  for (std::size_t i = 0; i < words; ++i) src[i] = rng();
  std::memset(dst.get(), 0, bytes);

  uint64_t sink = 0;
  const double hash_s =
      best_seconds(reps, [&] { sink ^= cprr::hash_buffer(src.get(), bytes).whole; });
  const double copy_s = best_seconds(reps, [&] {
    std::memcpy(dst.get(), src.get(), bytes);
    sink ^= dst[(sink & 0xffff) % words];
  });

  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("buffer %zu MiB, best of %d, chunk %zu KiB, %zu chunks\n", mib, reps,
              cprr::kHashChunkBytes / 1024, cprr::hash_chunk_count(bytes));
  std::printf("%-12s %10s %10s\n", "", "ms", "GB/s");
  std::printf("%-12s %10.2f %10.2f\n", "hash_buffer", hash_s * 1e3, gb / hash_s);
  std::printf("%-12s %10.2f %10.2f\n", "memcpy", copy_s * 1e3, gb / copy_s);
  std::printf("hash_buffer runs at %.2fx memcpy's rate (checksum %016llx)\n", copy_s / hash_s,
              static_cast<unsigned long long>(sink));
  return 0;
}

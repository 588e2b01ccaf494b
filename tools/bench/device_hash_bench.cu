// Device hash benchmark: launch_chunk_hashes (kernels/device_hash.h) on one device buffer against
// a read-only reduction kernel of the same buffer (the yardstick: what any kernel that only reads
// the buffer reaches; target >= 85% of its bandwidth), a device-to-device cudaMemcpyAsync (shown
// with read + write bytes counted, since a copy moves both), and the naive path, copying the buffer
// to pinned host memory and hashing it there with hash_buffer. Best of several repetitions.
// Verifies that device and host hashes agree.
//
//   cprr_bench_device_hash [--mib N] [--reps N]
// Exit status: 0 hashes match, 1 they differ, 2 no GPU or a CUDA failure.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/device_hash.h"
#include "kernels/hash.h"
#include "runtime/cuda_check.h"
#include "tools/bench/timing.h"

namespace {

// The yardstick: reads every 16-byte word of the buffer once (four loads in flight per thread)
// and folds them into one value per warp, added to `out`, so no load can be elided. Nothing is
// written per word: its bandwidth is that of reading alone.
__global__ void read_reduce(const uint4* __restrict__ words, std::size_t n,
                            unsigned long long* out) {
  const auto fold = [](uint4 w) {
    return (static_cast<unsigned long long>(w.x) | static_cast<unsigned long long>(w.y) << 32) ^
           (static_cast<unsigned long long>(w.z) | static_cast<unsigned long long>(w.w) << 32);
  };
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned long long acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = words[i], b = words[i + stride], c = words[i + 2 * stride],
                d = words[i + 3 * stride];
    acc += fold(a) + fold(b) + fold(c) + fold(d);
  }
  for (; i < n; i += stride) acc += fold(words[i]);
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

// A grid that fills the device: as many resident blocks of 256 threads as every SM holds.
dim3 read_reduce_grid() {
  int device = 0, sms = 0, per_sm = 0;
  CPRR_CUDA(cudaGetDevice(&device));
  CPRR_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CPRR_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_reduce, 256, 0));
  return dim3(static_cast<unsigned>(sms * std::max(per_sm, 1)));
}

// One cudaMalloc / cudaMallocHost allocation, freed on scope exit.
template <bool kPinned>
class Allocation {
 public:
  explicit Allocation(std::size_t bytes) {
    if constexpr (kPinned) {
      CPRR_CUDA(cudaMallocHost(&ptr_, bytes));
    } else {
      CPRR_CUDA(cudaMalloc(&ptr_, bytes));
    }
  }
  ~Allocation() {
    if constexpr (kPinned) {
      cudaFreeHost(ptr_);
    } else {
      cudaFree(ptr_);
    }
  }
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  template <class T = uint8_t>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

// Best of `reps` runs of `enqueue` on `stream`, timed by events, in seconds.
template <class F>
double best_gpu_seconds(int reps, cudaStream_t stream, F&& enqueue) {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  CPRR_CUDA(cudaEventCreate(&start));
  CPRR_CUDA(cudaEventCreate(&stop));
  float best_ms = 1e30f;
  for (int r = 0; r < reps; ++r) {
    CPRR_CUDA(cudaEventRecord(start, stream));
    enqueue();
    CPRR_CUDA(cudaEventRecord(stop, stream));
    CPRR_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CPRR_CUDA(cudaEventElapsedTime(&ms, start, stop));
    best_ms = std::min(best_ms, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best_ms / 1e3;
}

// `bytes` is what the row counts as moved: the buffer once for a read, twice for a copy.
void print_row(const char* name, double seconds, std::size_t bytes) {
  std::printf("%-40s %9.3f %9.1f\n", name, seconds * 1e3,
              static_cast<double>(bytes) / seconds / 1e9);
}

// The benchmark's memory: random contents in `src` (plus one spare byte, so the same contents can
// also be hashed from an odd address) and a pinned host copy of them.
struct Buffers {
  explicit Buffers(std::size_t n)
      : bytes(n),
        chunks(cprr::hash_chunk_count(n)),
        src(n + 1),
        dst(n),
        hashes(8 * chunks),
        odd_hashes(8 * chunks),
        reduce_out(sizeof(unsigned long long)),
        host(n + 1),
        host_hashes(8 * chunks) {
    std::mt19937_64 rng(42);
    for (std::size_t i = 0; i <= bytes; ++i) host.as()[i] = static_cast<uint8_t>(rng());
    CPRR_CUDA(cudaMemcpy(src.as(), host.as(), bytes + 1, cudaMemcpyHostToDevice));
    CPRR_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~Buffers() { cudaStreamDestroy(stream); }

  std::size_t bytes;
  std::size_t chunks;
  Allocation<false> src, dst, hashes, odd_hashes, reduce_out;
  Allocation<true> host, host_hashes;
  cudaStream_t stream = nullptr;
  uint64_t device_whole = 0;  // from the last device digest
  cprr::Digest host_digest;   // from the last naive run
};

struct Timings {
  double hash, odd_hash, digest, read, copy, naive;  // seconds, best of the repetitions
};

Timings measure(Buffers& b, int reps) {
  const auto hash = [&] {
    cprr::kernels::launch_chunk_hashes(b.src.as(), b.bytes, b.hashes.as<uint64_t>(), b.stream);
  };
  const auto odd_hash = [&] {
    cprr::kernels::launch_chunk_hashes(b.src.as() + 1, b.bytes, b.odd_hashes.as<uint64_t>(),
                                       b.stream);
  };
  const dim3 grid = read_reduce_grid();
  const auto read = [&] {
    read_reduce<<<grid, 256, 0, b.stream>>>(b.src.as<const uint4>(), b.bytes / sizeof(uint4),
                                            b.reduce_out.as<unsigned long long>());
    CPRR_CUDA(cudaGetLastError());
  };
  const auto copy = [&] {
    CPRR_CUDA(cudaMemcpyAsync(b.dst.as(), b.src.as(), b.bytes, cudaMemcpyDeviceToDevice, b.stream));
  };
  const auto digest = [&] {  // what a caller needing the whole hash on the host pays
    hash();
    CPRR_CUDA(cudaMemcpyAsync(b.host_hashes.as(), b.hashes.as(), 8 * b.chunks,
                              cudaMemcpyDeviceToHost, b.stream));
    CPRR_CUDA(cudaStreamSynchronize(b.stream));
    b.device_whole = cprr::whole_hash_of_chunks(b.host_hashes.as<uint64_t>(), b.chunks, b.bytes);
  };
  const auto naive = [&] {
    CPRR_CUDA(cudaMemcpyAsync(b.host.as(), b.src.as(), b.bytes, cudaMemcpyDeviceToHost, b.stream));
    CPRR_CUDA(cudaStreamSynchronize(b.stream));
    b.host_digest = cprr::hash_buffer(b.host.as(), b.bytes);
  };
  hash();  // warm-up: module load and the secret upload stay out of the timings
  odd_hash();
  read();
  copy();
  CPRR_CUDA(cudaStreamSynchronize(b.stream));
  return {
      best_gpu_seconds(reps, b.stream, hash),  best_gpu_seconds(reps, b.stream, odd_hash),
      cprr::bench::best_seconds(reps, digest), best_gpu_seconds(reps, b.stream, read),
      best_gpu_seconds(reps, b.stream, copy),  cprr::bench::best_seconds(std::min(reps, 3), naive)};
}

void print_report(const Buffers& b, const Timings& t, int reps) {
  std::printf("buffer %zu MiB, best of %d, %zu chunks of %zu KiB\n", b.bytes >> 20, reps, b.chunks,
              cprr::kHashChunkBytes / 1024);
  std::printf("%-40s %9s %9s\n", "", "ms", "GB/s");
  print_row("device chunk hashes (read)", t.hash, b.bytes);
  print_row("device chunk hashes, odd address (read)", t.odd_hash, b.bytes);
  print_row("device digest, hashes+D2H+whole (read)", t.digest, b.bytes);
  print_row("read-only reduction kernel (read)", t.read, b.bytes);
  print_row("cudaMemcpyAsync D2D (read + write)", t.copy, 2 * b.bytes);
  print_row("naive: D2H pinned + hash_buffer (read)", t.naive, b.bytes);
  std::printf("hash / read-only reduction bandwidth: %.0f%% (target >= 85%%)\n",
              100.0 * t.read / t.hash);
  std::printf("device-hash speedup over naive: %.1fx (digest end to end: %.1fx)\n",
              t.naive / t.hash, t.naive / t.digest);
}

// Device chunk hashes of both placements and the device-side whole hash against hash_buffer.
bool verify(const Buffers& b) {
  std::vector<uint64_t> got(b.chunks), got_odd(b.chunks);
  CPRR_CUDA(cudaMemcpy(got.data(), b.hashes.as(), 8 * b.chunks, cudaMemcpyDeviceToHost));
  CPRR_CUDA(cudaMemcpy(got_odd.data(), b.odd_hashes.as(), 8 * b.chunks, cudaMemcpyDeviceToHost));
  CPRR_CUDA(cudaMemcpy(b.host.as(), b.src.as(), b.bytes + 1, cudaMemcpyDeviceToHost));
  const cprr::Digest want = cprr::hash_buffer(b.host.as(), b.bytes);
  const bool match = got == want.chunks && b.device_whole == want.whole && b.host_digest == want &&
                     got_odd == cprr::hash_buffer(b.host.as() + 1, b.bytes).chunks;
  std::printf("%s (whole %016llx)\n", match ? "hashes match" : "HASHES DIFFER",
              static_cast<unsigned long long>(want.whole));
  return match;
}

int run(std::size_t mib, int reps) {
  Buffers b(mib << 20);
  const Timings t = measure(b, reps);
  print_report(b, t, reps);
  return verify(b) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 256;
  int reps = 10;
  CLI::App app{
      "cprr device hash benchmark: chunk hashing on the GPU against a read-only reduction of the "
      "same buffer"};
  app.add_option("--mib", mib, "buffer size in MiB")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "repetitions; the best one counts")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cprr_bench_device_hash: no GPU (%s); this benchmark needs one\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 2;
  }
  try {
    return run(mib, reps);
  } catch (const cprr::Error& e) {
    std::fprintf(stderr, "cprr_bench_device_hash: %s\n", e.what());
    return 2;
  }
}

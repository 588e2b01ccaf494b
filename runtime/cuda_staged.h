#pragma once
// Collectives of a cuda world whose ranks share GPUs: NCCL refuses two ranks of one communicator
// on one GPU, so they go through Gloo (the cpu backend's communicator, rendezvous in the world's
// directory) with device buffers staged through pinned host memory, in stream order:
//
//   stream:  copy input to host -> [ready event] -> held by a one-thread kernel -> copy result back
//   lane:                           wait for ready -> Gloo call on the host -> release the kernel
//
// Every device copy is on the collective's stream; the lane only works on host memory.
//
// A lane is a host thread per CUDA stream (a CpuStream), so collectives on different streams
// proceed side by side with their own tags, as on the cpu backend. The stream never blocks the
// host: the kernel polls a pinned flag the lane sets. The backend records its before/after events
// around the whole sequence, so progress, the flight record and hang diagnosis read as with NCCL.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cpu_stream.h"
#include "runtime/gloo_comm.h"

namespace cprr {

/// The last of `spare` (taken out of it), or a new event without timing when it is empty.
cudaEvent_t take_spare_event(std::vector<cudaEvent_t>& spare);

/// Pinned host memory the device can read and write through its host address; RAII.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept { *this = std::move(o); }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

class StagedCollectives {
 public:
  /// Joins the Gloo communicator through the FileStore directory `rendezvous` (every rank of the
  /// world, or of the group, calls it). `device` is the rank's GPU, made current on the lanes'
  /// threads. `prepared_lanes`: lanes given staging memory now (a group's, made mid-case, none).
  StagedCollectives(int rank, int world_size, int device, const std::string& rendezvous,
                    int prepared_lanes = kPreparedLanes);
  /// Finishes what the lanes hold and joins them.
  ~StagedCollectives();
  StagedCollectives(const StagedCollectives&) = delete;
  StagedCollectives& operator=(const StagedCollectives&) = delete;

  /// Issues `call` on `stream` (the backend's stream index `lane`, native handle `s`).
  void issue(int lane, cudaStream_t s, const CollectiveCall& call);
  /// An all-reduce of a buffer in the symmetric pool, as NCCL's symmetric kernels do it: every
  /// rank reads every peer's window at *its own* offset (`peers[r]`: rank r's pool at this rank's
  /// offset, as this process maps it), reduced in rank order, so a layout that differs across
  /// ranks gives wrong sums (seed 002) as on the cpu backend and on NCCL windows.
  void issue_symmetric_all_reduce(int lane, cudaStream_t s, const CollectiveCall& call,
                                  std::vector<const std::byte*> peers);

  /// Throws the first error a lane hit (a Gloo failure: a peer gone), or once aborted; used
  /// while the host polls a stream. Results of the call that failed are not to be trusted.
  void check_async() const;
  /// Marks the collectives aborted (the controller gave up on a hung case; the rank exits next).
  void abort() { aborted_.store(true); }
  bool aborted() const { return aborted_.load(); }

  /// Start of a case (every stream idle): frees the staging buffers outgrown in the last one.
  void case_started();

  /// Blocking host collectives for the backend's own exchanges while connecting and before a
  /// case (never concurrent with a case's collectives): tags of their own.
  int min_over_ranks(int value);
  std::vector<std::byte> all_gather_bytes(const void* mine, std::size_t bytes);

 private:
  struct Lane {
    std::unique_ptr<CpuStream> thread;
    PinnedBuffer flag;  ///< one uint64: the last ticket the lane finished (the kernel polls it)
    PinnedBuffer staging;
    std::vector<PinnedBuffer> outgrown;  ///< may still be read by queued work: freed per case
    uint64_t issued = 0;                 ///< tickets handed out (issuing thread only)
  };
  /// What the lane runs for one collective, between the ready event and the release.
  using HostPart = std::function<void()>;

  Lane& lane(int index);
  /// The lane's staging buffer, at least `bytes` long (the old one kept until the case ends).
  /// A buffer allocated mid-case is a pinned allocation, which CUDA may order between streams:
  /// the first kPreparedLanes lanes get kPreparedBytes at start-up, so collectives up to that
  /// size never allocate in a case; a world keeps what its lanes grew to for its later cases.
  std::byte* staging(Lane& l, std::size_t bytes);
  /// Hands `host` to the lane once stream `s` got here, and holds the stream until the lane
  /// finished it: everything the stream did before is visible to `host`, everything after sees
  /// what `host` wrote to staging. The stream's own copies stay on the stream.
  void host_step(Lane& l, cudaStream_t s, const std::string& label, HostPart host);
  /// Waits on the lane's thread until `ready` completed (polling, so an abort is noticed).
  void await(cudaEvent_t ready) const;
  void run_gloo(const CollectiveCall& c, std::byte* in, std::byte* out);
  cudaEvent_t take_event();
  void give_event(cudaEvent_t e);
  void note_error(const std::string& what);
  uint32_t internal_tag() { return kInternalTag | (internal_++ & 0x0fffffffu); }

  /// Tags of the backend's own exchanges: apart from a case's (its sequence numbers) and from
  /// the symmetric all-reduce's barriers (the two top bits).
  static constexpr uint32_t kInternalTag = 0x20000000u;
  static constexpr int kPreparedLanes = 4;
  static constexpr std::size_t kPreparedBytes = std::size_t{4} << 20;

  int rank_;
  int world_size_;
  int device_;
  GlooComm comm_;
  uint32_t internal_ = 0;
  std::vector<std::unique_ptr<Lane>> lanes_;  // index = stream; grown by the issuing thread
  mutable std::mutex mu_;                     // events_, error_
  std::vector<cudaEvent_t> events_;
  std::string error_;
  std::atomic<bool> aborted_{false};
};

}  // namespace cprr

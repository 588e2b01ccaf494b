#pragma once
// The CPU backend: "device" memory is host memory in mmap'ed arenas, a stream is a CpuStream
// thread, events are (stream, ticket) pairs, collectives go through Gloo on loopback. Same inputs
// and seed give bit-identical results, run after run.
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cpu_stream.h"
#include "runtime/gloo_comm.h"

namespace cprr {

/// RAII mapping. MAP_NORESERVE: only pages a case touches cost memory.
class MappedRegion {
 public:
  /// Private anonymous memory.
  explicit MappedRegion(uint64_t bytes);
  /// The whole of file `fd` (`bytes` long), shared: what one process writes, every process that
  /// maps the file sees.
  MappedRegion(int fd, uint64_t bytes);
  ~MappedRegion();
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

/// The one-sided window of a CPU world: each rank's symmetric pool plus its semaphore table is a
/// file in the world's rendezvous directory that every rank maps shared, so a put really lands
/// in the peer's memory and a skipped wait really reads stale data. A world of one has no file:
/// its window is private memory.
class CpuWindow {
 public:
  /// Creates and maps this rank's file (before the communicator connects).
  CpuWindow(int rank, int world_size, const std::string& dir, uint64_t pool_bytes);
  /// Maps every peer's file: call once every rank created its own (after the rendezvous).
  void map_peers();
  std::byte* pool(int rank) const;
  /// Rank `rank`'s semaphore table (kMaxSemaphores * world_size slots).
  uint64_t* semaphores(int rank) const;
  uint64_t pool_bytes() const { return pool_bytes_; }

 private:
  std::string path_of(int rank) const;

  int rank_;
  int world_size_;
  std::string dir_;
  uint64_t pool_bytes_;
  uint64_t file_bytes_;
  std::vector<std::unique_ptr<MappedRegion>> maps_;  // index = rank; null until mapped
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendConfig& config);
  ~CpuBackend() override;

  std::string_view name() const override { return backend_name(BackendKind::cpu); }
  std::byte* arena_base(MemPool pool) override;
  uint64_t arena_capacity(MemPool pool) const override;
  int stream(int index, std::string_view name) override;
  void enqueue_host(int stream, std::string label, std::function<void()> fn) override;
  void copy_async(int stream, void* dst, const void* src, std::size_t bytes) override;
  void collective(int stream, CollectiveCall call) override;
  int create_event() override;
  void record_event(int event, int stream) override;
  void wait_event(int stream, int event) override;
  void release_events() override { events_.clear(); }
  void synchronize(int stream) override;
  void synchronize_all() override;
  CollectiveProgress collective_progress() const override;
  std::vector<std::string> running_ops() const override;
  void reset_collective_progress() override;
  std::vector<SplitVote> split_votes(SplitVote mine, uint32_t tag) override;
  /// A Gloo context of the group's members, joined through a directory of its own in the world's
  /// rendezvous directory (a FileStore keeps its keys, so every group of the world's life gets a
  /// new one); a group of one needs none.
  void make_group(uint32_t group, SplitVote mine, const std::vector<int>& members) override;
  void end_groups(bool clean) override;
  void close_ended_groups() override;
  std::string one_sided_problem() override { return {}; }
  std::string symmetric_pool() const override;
  /// This host: a world's cpu ranks must share it (loopback Gloo, a window of shared files).
  std::string device_identity() const override;
  void put(int stream, int peer, uint64_t offset, const void* src, std::size_t bytes) override;
  void signal(int stream, int peer, uint32_t slot, uint64_t value) override;
  void wait_signal(int stream, uint32_t slot, uint64_t value) override;
  void delay(int stream, uint32_t us) override;
  void begin_marks() override { marks_.clear(); }
  void mark(int stream) override;
  std::vector<int64_t> marks() override;
  std::vector<StartupPhase> take_startup_phases() override { return startup_.take(); }

 private:
  CpuStream& at(int stream);
  void run_collective(const CollectiveCall& call);
  /// The communicator of `group` (nullptr: a group, or a world, of one rank).
  GlooComm* comm_of(uint32_t group);
  /// True when [p, p + bytes) lies in this rank's symmetric window.
  bool in_window(const void* p, std::size_t bytes) const;
  void symmetric_all_reduce(const CollectiveCall& call, uint32_t tag);
  void symmetric_all_gather(const CollectiveCall& call, uint32_t tag);

  std::array<std::unique_ptr<MappedRegion>, 3> arenas_;  // the symmetric one lives in window_
  std::unique_ptr<CpuWindow> window_;
  int rank_ = 0;
  int world_size_ = 1;
  std::unique_ptr<GlooComm> comm_;
  std::string rendezvous_;
  uint64_t splits_ = 0;   ///< make_group calls over the world's life: each group's directory
  std::mutex groups_mu_;  // stream threads look groups up while the case thread adds them
  std::map<uint32_t, std::unique_ptr<GlooComm>> groups_;  // null: a group of one
  std::vector<std::unique_ptr<GlooComm>> ended_;  ///< the last case's, until close_ended_groups
  mutable std::mutex streams_mu_;  // guards the vector; the watchdog walks it concurrently
  std::vector<std::unique_ptr<CpuStream>> streams_;
  std::vector<CpuEvent> events_;
  mutable std::mutex progress_mu_;
  CollectiveProgress progress_;
  /// Written by stream threads, each through a pointer taken when it was added: a deque keeps
  /// its elements in place as it grows.
  std::deque<std::atomic<int64_t>> marks_;
  PhaseClock startup_;
};

}  // namespace cprr

#pragma once
// The CPU backend: "device" memory is host memory in mmap'ed arenas, a stream is a CpuStream
// thread, events are (stream, ticket) pairs, collectives go through Gloo on loopback. Same inputs
// and seed give bit-identical results, run after run.
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cpu_stream.h"
#include "runtime/gloo_comm.h"

namespace cprr {

/// RAII anonymous mapping. MAP_NORESERVE: only pages a case touches cost memory.
class MappedRegion {
 public:
  explicit MappedRegion(uint64_t bytes);
  ~MappedRegion();
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendConfig& config);
  ~CpuBackend() override;

  std::string_view name() const override { return "cpu"; }
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

 private:
  CpuStream& at(int stream);
  void run_collective(const CollectiveCall& call);

  std::array<std::unique_ptr<MappedRegion>, 3> arenas_;
  std::unique_ptr<GlooComm> comm_;
  mutable std::mutex streams_mu_;  // guards the vector; the watchdog walks it concurrently
  std::vector<std::unique_ptr<CpuStream>> streams_;
  std::vector<CpuEvent> events_;
  mutable std::mutex progress_mu_;
  CollectiveProgress progress_;
};

}  // namespace cprr

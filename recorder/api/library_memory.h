#pragma once
// Memory of a case's own library (torch's CUDA tensors) from cprr's device arena: cprr as
// PyTorch's CUDA allocator (python/native/torch_allocator.cpp plugs this into torch), so a
// tensor's placement follows the case's placement policy (best_fit, counter, never_reuse,
// shuffled) like a C++ case's buffers, and a replay can move it.
//
// It keeps the contract torch's caching allocator gives, so correct code stays correct: memory
// freed on a stream serves only later requests on that stream (whose order makes the reuse safe),
// after the streams record_stream named have finished with it (the stream waits for them, on the
// device); at the next case's start, once the device is idle, every freed block is anyone's.
// Memory a case frees while a stream it did not name still reads it is reused all the same: the
// free/reuse race the op log then shows.
//
// Tensors may outlive their case (a module's cache): their memory stays theirs until torch frees
// it, whenever that is; the arena is not reset under them.
//
// Memory handed out while its stream was being captured into a CUDA graph is the graph's: every
// replay uses it again, as torch's private graph pools keep it. Freed, it is kept from everyone
// until the next case starts (torch's pluggable allocator is not told when a graph dies).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cprr {

struct RankState;

class LibraryMemory {
 public:
  explicit LibraryMemory(RankState& state);
  ~LibraryMemory();
  LibraryMemory(const LibraryMemory&) = delete;
  LibraryMemory& operator=(const LibraryMemory&) = delete;

  /// `bytes` for the library's work on `native` (a cudaStream_t; nullptr: the legacy stream),
  /// from the device arena with the case's placement policy. nullptr outside a case or when the
  /// arena has no room: the caller allocates elsewhere (full() says which). `graph`: `native`
  /// is being captured into a CUDA graph (see above). Any thread.
  std::byte* allocate(uint64_t bytes, void* native, bool graph = false);
  /// Takes back memory allocate() returned; false for memory that is not the arena's (the
  /// caller's to free). Any thread.
  bool release(std::byte* p);
  /// `native` uses the memory at `p` (torch's record_stream): it is reused only after what
  /// `native` enqueued before the release. Unknown addresses are ignored (not the arena's).
  void record_stream(std::byte* p, void* native);

  /// A case starts (its Context): its placement policy is set on the engine already. Blocks
  /// freed before become anyone's, after the host waited for the device.
  void open_case();
  /// The case ended: until the next one, requests go elsewhere.
  void close_case();
  /// The addresses of blocks released since the last call while a case was open (by any
  /// thread), oldest first: the frees for the case's allocation log.
  std::vector<uint64_t> take_released();

  /// The case's library has a CUDA graph capture open (LibraryHooks::begin_graph_capture):
  /// only then does the allocator ask whether a request's stream is being captured.
  void set_capture_open(bool open) { capture_open_.store(open, std::memory_order_relaxed); }
  bool capture_open() const { return capture_open_.load(std::memory_order_relaxed); }

  /// Whether a request found the arena full since the process started.
  bool full() const;

  /// The instance the C allocator entry points serve (nullptr: none); set by serve(), cleared
  /// when that instance is destroyed. The one process-wide pointer: torch calls plain C
  /// functions without a context of ours.
  static LibraryMemory* serving();
  void serve();

 private:
  struct Block {
    uint64_t offset = 0;
    void* stream = nullptr;
    std::vector<void*> users;  // other streams record_stream named
    bool graph = false;        // handed out during a graph capture
  };

  RankState& state_;
  std::atomic<bool> capture_open_{false};  // read by every allocation, without the mutex
  mutable std::mutex mu_;
  bool open_ = false;
  bool full_ = false;
  std::unordered_map<std::byte*, Block> blocks_;
  std::vector<uint64_t> released_;
  /// Freed graph memory (offset, owner), given back to the engine at the next case's start.
  std::vector<std::pair<uint64_t, uint64_t>> parked_;
};

}  // namespace cprr

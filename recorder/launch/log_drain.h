#pragma once
// Drains the stdout/stderr pipes of a world's ranks into per-pipe rings on a background thread,
// so a rank that floods fd 1 or fd 2 (NCCL banners, seed 000) never blocks and never reaches the
// control channel. The controller takes each execution's share as "bytes since the mark".
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "recorder/launch/byte_ring.h"
#include "runtime/fd.h"

namespace cprr {

class LogDrain {
 public:
  explicit LogDrain(std::size_t ring_bytes) : ring_bytes_(ring_bytes) {}
  /// Stops and joins the drain thread.
  ~LogDrain();
  LogDrain(const LogDrain&) = delete;
  LogDrain& operator=(const LogDrain&) = delete;

  /// Adds a pipe's read end (before start()); returns its index.
  int add(UniqueFd fd);
  /// Starts the background thread.
  void start();
  /// Reads everything the pipes hold right now on the caller's thread, so output written before
  /// a rank reported is attributed to that execution.
  void drain_now();
  /// Total bytes seen on pipe `idx` so far.
  uint64_t mark(int idx) const;
  /// Bytes of pipe `idx` since `mark` (at most the ring's capacity, newest kept).
  std::string since(int idx, uint64_t mark) const;
  /// Waits up to `timeout_ms` for every pipe to reach EOF (call after the writers died).
  void wait_eof(int timeout_ms);

 private:
  struct Pipe {
    UniqueFd fd;
    ByteRing ring;
  };
  void run();
  /// Reads one chunk from pipe i (lock held). False when the pipe is at EOF (and closes it).
  bool read_some(Pipe& p);

  const std::size_t ring_bytes_;
  mutable std::mutex mu_;
  std::vector<Pipe> pipes_;
  UniqueFd wake_read_;
  UniqueFd wake_write_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cprr

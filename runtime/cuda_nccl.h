#pragma once
// A non-blocking NCCL communicator (config.blocking = 0) so that a hung collective can be ended
// with ncclCommAbort from the watchdog thread, plus the symmetric memory window. Bootstrapped
// through the controller: rank 0's ncclUniqueId travels in its hello and comes back to every rank.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/backend.h"

namespace cprr {

/// ncclGetUniqueId as bytes (what rank 0 sends in its hello).
std::string nccl_unique_id();

/// "2.28.3": the NCCL library this process loaded (not the headers it was built with).
std::string nccl_runtime_version();

class NcclComm {
 public:
  /// Starts joining the communicator and returns at once: NCCL goes on in its own thread (the
  /// config is non-blocking) while the rank does other work; wait_joined() waits for it. Every
  /// rank starts it at the same point (connecting), so no case's order of calls can mismatch
  /// it. Throws cprr::Error when NCCL refuses at once.
  NcclComm(int rank, int world_size, const std::string& unique_id);
  /// Finalizes and destroys the communicator (after deregistering the window; a join still
  /// under way is let finish first, 5 s at most), or only forgets it once aborted.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  /// The communicator, once joined (see wait_joined).
  ncclComm_t get() const { return comm_; }

  /// Waits until the join the constructor started has finished (at once after the first time);
  /// throws on failure or once aborted (abort() ends the wait).
  void wait_joined();
  bool joined() const { return joined_.load(); }
  /// Polls until the join has finished or failed, 5 s at most; never throws.
  void settle_join();

  /// ncclCommSplit (collective over this communicator: every rank calls it): the communicator of
  /// the ranks that pass `color`, ordered by `key`; nullptr for a negative color. `group_rank`
  /// and `group_size` are what the caller expects, checked against what NCCL made.
  std::unique_ptr<NcclComm> split(int color, int key, int group_rank, int group_size);

  /// Issues `call` on `stream` (NCCL enqueues; the stream runs it). `scratch` is a device int
  /// the barrier all-reduces.
  void issue(const CollectiveCall& call, cudaStream_t stream, void* scratch);

  /// Throws when the communicator reported an asynchronous error or was aborted; used while the
  /// host polls a stream.
  void check_async() const;

  /// Registers [base, base + bytes) (from ncclMemAlloc) as a symmetric window. Collective: every
  /// rank calls it in the same order. Returns an empty string, or why it could not.
  std::string register_window(void* base, std::size_t bytes);
  /// The window register_window made: nullptr before, after a failure, or where NCCL registered
  /// none (a communicator without symmetric memory support succeeds without one).
  ncclWindow_t window() const { return window_; }
  /// Ranks in NCCL's load/store-accessible team, whose registered windows NCCL maps into this
  /// process (every rank on one host with P2P between the GPUs); throws once aborted.
  int lsa_size() const;

  /// Ends every outstanding operation (thread-safe, idempotent); later calls throw.
  void abort();
  bool aborted() const { return aborted_.load(); }

 private:
  /// A communicator made by split(): owned from here on.
  NcclComm(ncclComm_t comm, int size) : comm_(comm), world_size_(size) { joined_ = true; }
  /// Non-blocking calls may return ncclInProgress: poll until the communicator settles.
  void wait_ready(const char* what) const;
  /// Polls `state` (a call's result) while it is ncclInProgress, 5 s at most (mu_ held): the
  /// state it settled in.
  ncclResult_t settle(ncclResult_t state) const;
  /// The NCCL calls of one collective (mu_ held).
  void enqueue(const CollectiveCall& call, cudaStream_t stream, void* scratch);

  ncclComm_t comm_ = nullptr;
  ncclWindow_t window_ = nullptr;
  int world_size_ = 1;
  std::atomic<bool> joined_{false};
  mutable std::mutex mu_;  // abort() must not free comm_ under a concurrent query
  std::atomic<bool> aborted_{false};
};

}  // namespace cprr

#pragma once
// The CPU backend's communicator: Gloo over TCP on loopback, rendezvous through a FileStore in a
// directory the controller creates per world. Every call blocks the calling thread until the
// collective completes on this rank (the caller is a CpuStream thread, so the host is not blocked).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dtype.h"

namespace gloo {
class Context;
}

namespace cprr {

/// The rendezvous directory of group `group` of split number `split` (counted over the world's
/// life, so no group finds an earlier one's keys: a FileStore keeps them), made in the world's
/// directory `world_dir` if missing; every member calls it. Throws cprr::Error naming it when it
/// cannot be made.
std::string group_rendezvous(const std::string& world_dir, uint64_t split, uint32_t group);

/// One rank's endpoint of a full-mesh Gloo context.
class GlooComm {
 public:
  /// Connects rank `rank` of `size` through the FileStore directory `rendezvous_dir` (which must
  /// exist). `timeout` bounds connection set-up and every collective. Throws cprr::Error naming
  /// the directory, rank and cause on failure.
  GlooComm(int rank, int size, const std::string& rendezvous_dir,
           std::chrono::milliseconds timeout);
  ~GlooComm();
  GlooComm(const GlooComm&) = delete;
  GlooComm& operator=(const GlooComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // `tag` separates concurrent collectives; callers pass the per-communicator sequence number.
  // Counts are in elements of `dtype`. Gloo failures (peer gone, timeout) throw cprr::Error.

  /// In-place all-reduce of `count` elements at `buf`.
  void all_reduce(void* buf, std::size_t count, DType dtype, ReduceOp op, uint32_t tag);
  /// Gathers `count` elements from every rank into `out` (size * count elements, rank order).
  void all_gather(const void* in, void* out, std::size_t count, DType dtype, uint32_t tag);
  /// Sends send_counts[r] elements (packed in rank order in `in`) to rank r and receives
  /// recv_counts[r] elements from rank r (packed in rank order in `out`). Zero counts are allowed.
  void all_to_all_v(const void* in, const std::vector<int64_t>& send_counts, void* out,
                    const std::vector<int64_t>& recv_counts, DType dtype, uint32_t tag);
  /// Broadcasts `count` elements at `buf` from `root` to every rank, in place.
  void broadcast(void* buf, std::size_t count, DType dtype, int root, uint32_t tag);
  /// Returns once every rank entered the barrier.
  void barrier(uint32_t tag);
  /// Sends `count` elements at `buf` to rank `peer`; returns once they are sent. `tag` numbers
  /// the messages to that peer: it matches the peer's recv with the same tag from this rank.
  void send(const void* buf, std::size_t count, DType dtype, int peer, uint32_t tag);
  /// Receives `count` elements from rank `peer` into `buf` (the send with the same tag).
  void recv(void* buf, std::size_t count, DType dtype, int peer, uint32_t tag);
  /// Local, no communication: acc[i] = op(acc[i], other[i]) for `count` elements of `dtype`.
  static void reduce_into(void* acc, const void* other, std::size_t count, DType dtype,
                          ReduceOp op);

 private:
  int rank_;
  int size_;
  std::shared_ptr<gloo::Context> context_;
};

}  // namespace cprr

#pragma once
// What one rank captures while running one case: hashed probes and outputs, and the three logs
// (allocation, op, collective). These records travel over the control protocol (serialize()
// members are cereal-compatible) and, through the recorder, into SQLite.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/hash.h"
#include "runtime/dtype.h"

namespace cprr {

/// A buffer hashed at a point in stream order: a probe (intermediate) or an output (result).
struct Capture {
  uint32_t seq = 0;  ///< order among this rank's captures of the same kind
  std::string name;
  DType dtype = DType::u8;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  int32_t stream = 0;
  Digest digest;
  std::string raw;  ///< the bytes themselves when bytes <= kRawCaptureLimit

  bool operator==(const Capture&) const = default;
  template <class A>
  void serialize(A& a) {
    a(seq, name, dtype, shape, bytes, stream, digest.whole, digest.chunks, raw);
  }
};

/// Captures up to this size also keep their raw bytes, so a divergence can print values.
inline constexpr uint64_t kRawCaptureLimit = 4096;

/// One allocator event. Sequence numbers restart at 0 for every case execution.
struct AllocRecord {
  uint64_t seq = 0;
  bool is_free = false;
  uint32_t buffer = 0;  ///< buffer id (stable per case execution)
  std::string name;
  std::string pool;  ///< "device" | "symmetric" | "host"
  uint64_t bytes = 0;
  uint64_t offset = 0;  ///< offset inside the pool's arena
  int32_t stream = 0;

  bool operator==(const AllocRecord&) const = default;
  template <class A>
  void serialize(A& a) {
    a(seq, is_free, buffer, name, pool, bytes, offset, stream);
  }
};

/// The bytes of one buffer an op touches: [offset, offset + bytes) from the buffer's start.
struct ByteSpan {
  uint64_t offset = 0;
  uint64_t bytes = 0;

  bool operator==(const ByteSpan&) const = default;
  template <class A>
  void serialize(A& a) {
    a(offset, bytes);
  }
};

/// One op in host issue order, with its stream and declared access sets; record/wait ops carry
/// the event id, so the log holds every happens-before edge the case created. A `sync` op is the
/// host waiting: for `stream` up to this point, or for every stream when `stream` is -1. The
/// one-sided ops name their peer: a `put` writes its `writes` in the peer's symmetric window (at
/// the offsets this rank's allocation log gives them), a `signal` raises the peer's semaphore
/// `event` to `epoch`, a `wait_signal` waits until the peer's signals on semaphore `event` reached
/// `epoch`.
struct OpRecord {
  uint64_t seq = 0;
  int32_t stream = 0;  ///< -1 for host-side accesses (and for a sync of all streams)
  /// kernel | copy | collective | record | wait | probe | output | host | sync | put | signal |
  /// wait_signal | native (Context::native) | handle (a native handle taken, on the host) |
  /// unseen (work of the case's library outside the op log, counted in its name) | captured
  /// (an op of the case's library captured into a CUDA graph: logged again at each launch)
  std::string kind;
  std::string name;
  std::vector<uint32_t> reads;
  std::vector<uint32_t> writes;
  int64_t event = -1;  ///< record / wait: the event; signal / wait_signal: the semaphore
  /// Which bytes of each buffer of `reads` / `writes` the op touches, parallel to them: a slice
  /// is its parent's id plus its span. Empty: whole buffers (a record from before spans).
  std::vector<ByteSpan> read_spans;
  std::vector<ByteSpan> write_spans;
  int32_t peer = -1;   ///< put / signal / wait_signal: the other rank; else -1
  uint64_t epoch = 0;  ///< signal: the value it sets; wait_signal: the value it waits for
  /// The op only moves bytes: its writes' spans, laid end to end, are a copy of its reads'
  /// (a copy, clone, dtype cast or dim-0 cat of contiguous tensors), byte k of the reads landing
  /// at byte k * written / read of the writes. Never-written bytes it reads make the bytes it
  /// writes never-written instead of being a read of them (uninit_check.h), as memcheck does.
  bool moves = false;
  /// Buffers the op uses in a direction not known (it may read, write, or only be handed their
  /// addresses): an opaque call given their pointers (Access::uses, or a kernel's pointer
  /// parameters). A race through one is a candidate that replays confirm or drop
  /// (analysis/happens_before.h); the uninitialized-read check takes them as written.
  std::vector<uint32_t> touches;
  std::vector<ByteSpan> touch_spans;  ///< parallel to `touches`, like read_spans
  /// A probe replay (Perturbation::probe_touches) learned the op's directions: the bytes of its
  /// touches it changed were moved to `writes`, and `touches` are the bytes it left unchanged,
  /// which it read, did not use, or wrote with the values they held: the race check takes them
  /// as never written, the uninitialized-read check as written still. An op handed more than
  /// recorder/api/context.h's kMaxProbeBytes, or memory of no known address, stays unprobed.
  bool probed = false;

  /// A send or recv of the Case API (Context::message): a stream op named "send #n ..." or
  /// "recv #n ..." that carries its peer, its group (event) and its number there (epoch).
  bool is_message() const {
    return kind == "kernel" && peer >= 0 && event >= 0 &&
           (name.starts_with("send #") || name.starts_with("recv #"));
  }
  /// A message's (sender, receiver), ranks of the world, for this op of rank `rank`.
  std::pair<int32_t, int32_t> message_ends(int32_t rank) const {
    return name.starts_with("send #") ? std::pair{rank, peer} : std::pair{peer, rank};
  }

  bool operator==(const OpRecord&) const = default;
  template <class A>
  void serialize(A& a) {
    a(seq, stream, kind, name, reads, writes, event, read_spans, write_spans, peer, epoch, moves,
      touches, touch_spans, probed);
  }
};

/// One collective or point-to-point message, numbered where it is matched across ranks: a
/// collective by its group (`seq`: its number among the group's collectives), a send or recv by
/// its channel (group, sender, receiver; `seq`: the message's number on it). Lining these up
/// across ranks shows who skipped one, called it differently, or waits for a message never sent.
struct CollectiveRecord {
  uint64_t seq = 0;
  /// all_reduce | all_gather | all_to_all_v | broadcast | barrier | ... | send | recv
  std::string kind;
  int32_t stream = 0;
  DType dtype = DType::u8;
  uint64_t bytes = 0;           ///< bytes this rank sends (a recv: bytes it receives)
  int32_t root = -1;            ///< a rooted collective's root, as a rank of the world
  ReduceOp op = ReduceOp::sum;  ///< all_reduce's reduction (sum for every other kind)
  uint32_t group = 0;           ///< the group it runs on (GroupRecord::id; 0: the world)
  /// The group's ranks of the world, bit r for rank r; 0: every rank (the world, or a world of
  /// over 64 ranks, whose groups are then told by their logs alone).
  uint64_t members = 0;
  int32_t peer = -1;  ///< send: the receiver; recv: the sender (ranks of the world); else -1
  std::string where;  ///< the caller's file:line where the library knows it; else empty
  /// An uneven all-to-all (all_to_all_v): the bytes this rank sends to, and expects from, each
  /// rank of the group in group-rank order (ascending ranks of the world); empty: not recorded.
  std::vector<uint64_t> send_bytes;
  std::vector<uint64_t> recv_bytes;
  uint64_t row_bytes = 0;  ///< the bytes of one row (dim 0) of its tensors; 0: not rows

  bool is_p2p() const { return peer >= 0; }
  bool operator==(const CollectiveRecord&) const = default;
  template <class A>
  void serialize(A& a) {
    a(seq, kind, stream, dtype, bytes, root, op, group, members, peer, where, send_bytes,
      recv_bytes, row_bytes);
  }
};

/// A process group a rank took part in during a case: its id is its creation order in the
/// process (equal across ranks: every rank creates every group, torch's rule), 0 the world.
struct GroupRecord {
  uint32_t id = 0;
  std::vector<int32_t> ranks;  ///< its ranks of the world, in group-rank order
  std::string backend;         ///< gloo | nccl | ... as the library names it
  std::string name;            ///< what the library calls it (a DeviceMesh dim, a description)

  bool operator==(const GroupRecord&) const = default;
  template <class A>
  void serialize(A& a) {
    a(id, ranks, backend, name);
  }
};

/// When an op ran, in steady-clock nanoseconds (system-wide on Linux, so ranks on one host line
/// up): a stream op from when its stream reached it to when the stream passed it (CPU: the
/// stream thread's clock; CUDA: events), a host wait from its call to its return, a host access
/// at its declaration (end == begin). -1: not reached (an earlier op of its stream failed).
struct OpTime {
  int64_t begin_ns = -1;
  int64_t end_ns = -1;

  bool operator==(const OpTime&) const = default;
  template <class A>
  void serialize(A& a) {
    a(begin_ns, end_ns);
  }
};

/// What a trace needs beyond the logs; recorded only when asked (cprecord/cpreplay --trace), so
/// recording stays cheap. Empty otherwise.
struct Timeline {
  int64_t start_ns = 0;         ///< the case body's start on this rank
  std::vector<OpTime> ops;      ///< parallel to CaseCapture::ops
  std::vector<int64_t> allocs;  ///< parallel to CaseCapture::allocs: when the host called
  bool operator==(const Timeline&) const = default;
  bool empty() const { return ops.empty() && allocs.empty(); }

  template <class A>
  void serialize(A& a) {
    a(start_ns, ops, allocs);
  }
};

/// Everything a rank captured during one case execution.
struct CaseCapture {
  std::vector<Capture> probes;
  std::vector<Capture> outputs;
  std::vector<AllocRecord> allocs;
  std::vector<OpRecord> ops;
  std::vector<CollectiveRecord> collectives;
  /// The groups other than the world that `collectives` use or the case made, by id.
  std::vector<GroupRecord> groups;
  Timeline timeline;

  bool operator==(const CaseCapture&) const = default;
  template <class A>
  void serialize(A& a) {
    a(probes, outputs, allocs, ops, collectives, groups, timeline);
  }
};

}  // namespace cprr

#pragma once
// Reads of bytes nothing wrote: from one execution's logs, an op (or host access) that reads bytes
// of a buffer that no op of this case wrote through that buffer before it, in issue order. Buffer
// ids name one allocation each, so "written through this buffer" is "written since it was
// allocated": whatever an earlier buffer left in those bytes (a dirty pool, a pooled world's last
// case) is what such a read sees. Bytes a peer's put writes into this rank's symmetric window
// count as written (the put's timing is the race check's business). Reads of the host pool are
// not checked: case code writes host memory with plain stores, which the log has only when the
// case declares them (host_access), and an undeclared store is no uninitialized read. An op that
// only moves bytes (OpRecord::moves: a copy, a clone, a cat) carries never-written bytes to the
// bytes it writes instead of being their reader, as memcheck does: the read that uses them is
// the finding, and it says which copies brought them there. Collectives and messages that only
// move bytes between ranks (all_gather, broadcast, all_to_all, scatter, gather, send/recv and
// batch_isend_irecv's) carry them from the sender to every receiver the same way. Bytes an op
// uses in a direction not known (OpRecord::touches) count as written by it, never as read. A
// candidate, not a proof: cpreplay confirms it by poisoning new allocations with two patterns.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/capture.h"

namespace cprr {

/// The first read of never-written bytes (lowest rank, then issue order).
struct UninitRead {
  int32_t rank = 0;
  uint64_t op = 0;  ///< the reading op's position in the rank's op log
  int32_t stream = 0;
  std::string op_kind, op_name;
  uint32_t buffer = 0;
  std::string buffer_name;
  std::string pool;
  uint64_t begin = 0;  ///< the first unwritten byte range read, relative to the buffer's start
  uint64_t end = 0;
  /// How those bytes got there when copies or collectives carried them, latest first:
  /// "copied by op #5 (kernel 'aten.clone at x.py:12') from 'torch.empty(8,) at x.py:11'",
  /// "sent by rank 1 in op #23 (all_gather #0) from 'torch.empty(8,) at x.py:9'";
  /// empty when the buffer's own bytes were never written.
  std::string copied;
  /// Other ranks whose walk found the same read (same op name, buffer name, bytes and origin):
  /// one code line run by every rank is one finding.
  std::vector<int32_t> same_on_ranks;

  /// "rank 0 op #3 (kernel 'sum') reads bytes [0, 4096) of 'acc' (device pool), which nothing
  /// wrote since it was allocated" (or ", never-written bytes copied by ...").
  std::string describe() const;
};

/// Checks every rank's logs (index = rank; null: no log). A rank whose log has an "unseen" op
/// (its library's work outside the op log) is not checked: that work may have written the bytes.
std::optional<UninitRead> check_uninitialized_reads(const std::vector<const CaseCapture*>& ranks);

/// Every read of never-written bytes the check finds, lowest rank then issue order: the first
/// read of each buffer on each rank (a buffer read by many ops is one finding), the same read on
/// several ranks folded into the lowest rank's (same_on_ranks), at most `limit`.
std::vector<UninitRead> uninitialized_reads(const std::vector<const CaseCapture*>& ranks,
                                            std::size_t limit = 16);

}  // namespace cprr

#pragma once
// How a replay perturbs one execution to confirm a finding: delays before stream ops, every
// stream folded into one, or the host waiting for every stream after chosen ops (a stream race:
// replayer/race_confirmation.h); new allocations poisoned with a pattern (an uninitialized read);
// what opaque ops write, learned by copying their bytes around them (a probe replay).
// The default perturbs nothing, and cprecord never perturbs.
#include <cstdint>
#include <vector>

namespace cprr {

/// An op of one rank's op log (OpRecord::seq); rank -1 is that op of every rank.
struct OpSite {
  int32_t rank = 0;
  uint64_t seq = 0;

  bool operator==(const OpSite&) const = default;
  auto operator<=>(const OpSite&) const = default;
  template <class A>
  void serialize(A& a) {
    a(rank, seq);
  }
};

struct Perturbation {
  /// Non-zero: before each stream op the stream first idles for a delay drawn from this seed
  /// (and the rank and op), up to max_delay_us; about one op in three is delayed.
  uint64_t delay_seed = 0;
  uint32_t max_delay_us = 0;
  /// These ops are always delayed, by target_delay_us: the earlier op of a reported race, so a
  /// later op that is not ordered after it overtakes it.
  std::vector<OpSite> delay_ops;
  uint32_t target_delay_us = 0;
  /// Every stream the case creates is the default stream and the host waits for it after each op:
  /// the whole rank runs in issue order, host accesses included.
  bool one_stream = false;
  /// Right after issuing each of these ops, the host waits for every stream of its rank.
  std::vector<OpSite> sync_after;
  /// Non-zero: every new allocation is filled with this repeating 8-byte pattern, in stream
  /// order, before the case can touch it (uninitialized reads then read the pattern).
  uint64_t poison = 0;
  /// Each op with accesses of unknown direction (OpRecord::touches) is probed: the host waits
  /// for the device and copies the bytes it is handed right before it and again once it ran
  /// (before anything the case does next). The bytes that changed become its writes; the others
  /// stay touches, known unwritten (OpRecord::probed). The probe orders everything around the
  /// op, so this replay's outputs confirm nothing: it only learns directions.
  bool probe_touches = false;

  bool operator==(const Perturbation&) const = default;
  bool any() const {
    return delay_seed != 0 || !delay_ops.empty() || one_stream || !sync_after.empty() ||
           poison != 0 || probe_touches;
  }
  template <class A>
  void serialize(A& a) {
    a(delay_seed, max_delay_us, delay_ops, target_delay_us, one_stream, sync_after, poison,
      probe_touches);
  }
};

}  // namespace cprr

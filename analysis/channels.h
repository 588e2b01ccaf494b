#pragma once
// Where collective-log records are numbered and matched across ranks: a group's collectives (every
// member calls the group's n-th one), or one direction of point-to-point messages in a group (the
// sender's n-th send to the receiver is the receiver's n-th recv from it). Every cross-rank check
// of the collective logs (mismatch, hang diagnosis, a failed rank's leftovers) lines records up
// through these, so none is keyed by a number alone.
#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "data/capture.h"

namespace cprr {

struct CallChannel {
  uint32_t group = 0;
  int32_t sender = -1;  ///< a message channel's sender (a rank of the world); -1: collectives
  int32_t receiver = -1;
  /// The group's members as recorded: a library that gives one number to the groups one call
  /// made (each rank its own) still has them told apart.
  uint64_t members = 0;

  bool is_p2p() const { return sender >= 0; }
  auto operator<=>(const CallChannel&) const = default;
};

/// The channel of `c` in rank `rank`'s log.
CallChannel channel_of(const CollectiveRecord& c, int rank);

/// How many calls `log` (rank `rank`'s) made on `ch`: its highest number there plus one.
uint64_t reached(const std::vector<CollectiveRecord>& log, int rank, const CallChannel& ch);

/// The ranks of `c`'s group in a world of `world` ranks: the recorded members; every rank for the
/// world; for a group whose members were not recorded, the ranks whose logs (index = rank; null:
/// none) have a record in it.
std::vector<int> members_of(const CollectiveRecord& c, int world,
                            const std::vector<const std::vector<CollectiveRecord>*>& logs);

/// Whether rank `other` has a side in `c` (a call of rank `rank`'s: a collective of a group it is
/// in, or a message with it at the other end) and its log (`logs`, index = rank; null: none)
/// never got that far on c's channel.
bool never_entered(const CollectiveRecord& c, int rank, int other,
                   const std::vector<const std::vector<CollectiveRecord>*>& logs);

/// "collective #3 (all_reduce)", "collective #3 (all_reduce) of group 2", "recv #1 from rank 0",
/// "send #1 to rank 1 of group 2"; with " at file:line" when `with_site` and the record has one.
std::string call_phrase(const CollectiveRecord& c, bool with_site = false);

/// "group 2 (tp, ranks 2,3)" from the groups the ranks recorded (`groups`), else "group 2 (ranks
/// 2,3)" from the members bitmask of its records (`members`), else "group 2"; "" for the world.
std::string group_phrase(uint32_t group, const std::vector<const std::vector<GroupRecord>*>& groups,
                         uint64_t members = 0);

}  // namespace cprr

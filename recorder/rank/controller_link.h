#pragma once
// What a node agent (`cpworker --agent`, agent.h), the launched process that starts and
// supervises every rank of its node, shares with the controller that started it: the run's
// token, authenticated connections back to the controller, and ending what a rank leaves behind.
#include <string>

#include "recorder/launch/process.h"
#include "recorder/launch/tcp.h"
#include "recorder/protocol/protocol.h"
#include "runtime/fd.h"

namespace cprr {

/// One authenticated connection to the controller and its answer.
struct ControllerLink {
  UniqueFd fd;
  Welcome welcome;
  /// What was read past the Welcome: frames the controller sent right after it (a node agent's
  /// first StartRank) are here, not lost.
  FrameReader reader;
};

/// This executable's path (/proc/self/exe): what runs a rank when no other command is given.
std::string self_exe();

/// Takes the run's token from CPRR_TOKEN and removes it from the environment, so that no rank
/// and no case code ever sees it. Throws saying how a launcher passes it when it is not set.
std::string take_token();

/// Connects to `controller` (retrying while it is not reachable yet), sends `hs` and returns the
/// connection with the controller's Welcome; throws with the controller's reason when it refused.
ControllerLink open_channel(const Endpoint& controller, const Handshake& hs);

/// Ends a supervised rank's whole process group (what its case spawned included) and reaps it.
/// With `sweep_orphans`, then also every unowned process this subreaper took in (what left the
/// group, such as a daemon that called setsid); without, only those of the rank's group, since
/// other ranks may still own what was reparented here.
void end_rank_group(ChildProcess& child, bool sweep_orphans);

}  // namespace cprr

#pragma once
// A message pattern both corpus/messages.cpp (on the world) and corpus/groups.cpp (in each tp
// group) plant a race in.
#include "recorder/api/context.h"

namespace cprr {

/// Group rank 0 sends its activations to group rank 1 on a comm stream while the compute stream
/// rescales them; `wait_first`: the compute stream waits for the send first (the twin).
void send_while_rescaling(Context& ctx, const Group& group, bool wait_first);

}  // namespace cprr

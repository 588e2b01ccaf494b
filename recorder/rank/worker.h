#pragma once
// The worker binary's entry point: one rank process of a world. A user's own case library links
// cprr::cases (cprr_rank) plus its cases and calls worker_main from a one-line main, like
// tools/cpworker.

namespace cprr {

/// Parses the rank's arguments (set by the controller), connects the backend, says hello and
/// serves RunCase commands until Shutdown. Returns the process exit code.
int worker_main(int argc, char** argv);

}  // namespace cprr

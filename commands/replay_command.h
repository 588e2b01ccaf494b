#pragma once
// The cpreplay verb: list what a database holds, or replay one case and say what kind of bug it
// is and where. Mirrors commands/record_command.h.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "replayer/replay.h"

namespace cprr {

struct ReplayCommandOptions {
  /// --db (./cprr.db, where cprecord writes by default), --mode, the shared options
  /// (cli/cli_options.h) and --launcher: what every replay takes. replay.case_id is set from
  /// case_id.
  ReplayOptions replay{.db = "cprr.db"};
  bool list = false;
  std::optional<int64_t> case_id;
  bool all = false;               ///< triage a run (replayer/replay_all.h)
  std::optional<int64_t> run_id;  ///< with all: which run (default: the latest)
  int max_replays = 200;          ///< with all: the replay budget
  bool json = false;
};

/// Runs the verb in-process; `progress` prints each replay step on `err`. Returns the exit code:
/// 0 reproduced (and met its expectation), 1 diverged or failing, 2 via UsageError/Error.
int run_replay(const ReplayCommandOptions& options, std::ostream& out, std::ostream& err,
               bool progress);

/// The cpreplay main: parses argv (CLI11), then run_replay; exceptions become exit code 2.
int replay_main(int argc, char** argv);

}  // namespace cprr

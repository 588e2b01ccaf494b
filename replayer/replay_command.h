#pragma once
// The cpreplay verb: list what a database holds, or replay one case and say what kind of bug it
// is and where. Mirrors cli/record_command.h.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "data/launch_options.h"

namespace cprr {

class InterruptWatch;

struct ReplayCommandOptions {
  std::string db = "cprr.db";
  bool list = false;
  std::optional<int64_t> case_id;
  bool all = false;               ///< triage a run (replayer/replay_all.h)
  std::optional<int64_t> run_id;  ///< with all: which run (default: the latest)
  int max_replays = 200;          ///< with all: the replay budget
  std::string mode = "both";      ///< fresh | pool | both
  std::string worker;             ///< empty: the worker recorded in the run
  std::optional<double> timeout_s;
  bool json = false;
  std::string trace;  ///< with case_id: write the first replay's Chrome trace here
  /// --launcher and its options; nullopt: the way the recorded run started its ranks.
  std::optional<LaunchOptions> launch;
  int standby = 0;  ///< --standby N: fresh replays' worlds started ahead (ReplayOptions::standby)
  std::string collectives;  ///< --collectives (ReplayOptions::collectives); empty: as recorded
  /// Ctrl-C: stops the replay (its ranks killed); replay_main then exits 128 + the signal.
  const InterruptWatch* interrupt = nullptr;
};

/// Runs the verb in-process; `progress` prints each replay step on `err`. Returns the exit code:
/// 0 reproduced (and met its expectation), 1 diverged or failing, 2 via UsageError/Error.
int run_replay(const ReplayCommandOptions& options, std::ostream& out, std::ostream& err,
               bool progress);

/// The cpreplay main: parses argv (CLI11), then run_replay; exceptions become exit code 2.
int replay_main(int argc, char** argv);

}  // namespace cprr

#pragma once
// Replaying one recorded case: rebuild it exactly (parameters, seed, world size, the run's
// environment and placement policy, and for a pooled case its predecessors in the same world),
// re-run it fresh and/or pooled, compare with the record, and name the kind of bug and where.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/divergence.h"
#include "analysis/race_check.h"
#include "analysis/verdict.h"
#include "cli/cli_options.h"
#include "data/text_forms.h"
#include "recorder/engine/world_handle.h"
#include "replayer/race_confirmation.h"
#include "runtime/placement.h"
#include "schema/record_reader.h"

namespace cprr {

struct ReplayOptions {
  std::string db;
  int64_t case_id = 0;
  std::string mode = "both";  ///< fresh | pool | both
  /// --worker, --timeout, --trace FILE, --collectives, --standby, the template and Ctrl-C, as
  /// cprecord takes them (cli/cli_options.h). shared.worker empty: the worker recorded in the
  /// run. shared.trace non-empty: replays time every op, and the first replay of the case (fresh,
  /// else pooled) is written there as a Chrome trace (cli/trace.h). shared.standby: the worlds
  /// of the next N fresh replays certain to come (a race's confirmation, the poison and placement
  /// replays) start while earlier replays run, with the local launcher only. shared.collectives
  /// empty: as the record's where this machine can (a record staged through Gloo is replayed
  /// staged, else auto); a replay whose transport differs from the record's (a record with a GPU
  /// per rank replayed on one GPU) says so, and never reads the outputs' difference across
  /// transports as a bug. shared.interrupt: a replay stopped by it throws Interrupted.
  SharedOptions shared;
  /// --launcher and its options; nullopt: start the ranks the way the run did (run.launcher).
  std::optional<LaunchOptions> launch;
  /// --strict: refuse to replay (UsageError) when a case file or the worker changed since the
  /// record (cli/code_files.h); without it the replay goes on and says so first.
  bool strict = false;
  /// --pin: replay on the cores or GPUs the recorded execution ran on (its `devices`, which
  /// cprecord --jobs records): ranks pinned to those cores, or CUDA_VISIBLE_DEVICES those GPUs.
  /// A record with no placement is replayed as without it, and said so.
  bool pin = false;
  /// Set by replay_case from the record with `pin`: the GPUs the replays' ranks see.
  std::string pinned_gpus;
  /// What each replay's controller makes its worlds with; empty: real rank processes
  /// (ProcessWorlds). The seam where tests count the worlds started.
  std::function<std::unique_ptr<WorldFactory>()> worlds;
};

/// One placement replay (allocator_order and uninitialized_read verdicts).
struct PlacementReplay {
  Placement placement = Placement::best_fit;
  std::string status;
  std::string layout;   ///< the symmetric layout mismatch under this policy; empty: none
  std::string outputs;  ///< how the outputs differ from the run's policy's replay; empty: same
};

/// What the replay concluded. `verdict` uses the brief's vocabulary.
struct ReplayReport {
  RecordedCase recorded;
  std::string label;
  /// reproduced | state_leak | stream_race | nondeterministic | crash | hang
  Verdict verdict = Verdict::reproduced;
  std::optional<Divergence> first_divergence;
  std::vector<RecordedCase> polluters;
  std::size_t predecessors = 0;  ///< pooled predecessors in the record
  int replays = 0;               ///< executions of the target (each in its own world)
  int ddmin_replays = 0;         ///< of those, the delta-debugging ones
  std::optional<ExecStatus> recorded_fresh, recorded_pool, replayed_fresh, replayed_pool;
  /// The happens-before check over the recorded and replayed op logs, and how replays confirmed
  /// the race (replayer/race_confirmation.h); its replays are counted in `replays` too.
  std::optional<RaceFinding> race;
  std::vector<std::string> race_notes;
  std::optional<RaceConfirmation> confirmation;
  /// What the probe replay learned of ops handed buffers with no direction (a Triton kernel's
  /// pointers, Access::uses), one line per op (replayer/direction_probe.h); the checks above read
  /// the logs with those directions. Empty: no such op, or no probe replay completed.
  std::vector<std::string> learned;
  int probe_replays = 0;  ///< 1 when the logs had such ops (counted in `replays` too)
  /// The cross-rank checks over the same logs (analysis/layout_check.h).
  std::optional<Finding<LayoutMismatch>> allocation;
  std::optional<Finding<CollectiveMismatch>> collective_mismatch;
  std::optional<Finding<UninitRead>> uninitialized;
  std::vector<UninitRead> more_uninitialized;  ///< the other reads found with it
  /// Fresh replays with new allocations poisoned by two patterns; confirmed when outputs differ.
  int poison_replays = 0;
  bool poison_confirmed = false;
  /// The case under every placement policy (allocator_order, uninitialized_read), in order.
  std::vector<PlacementReplay> placements;
  /// The recorded case files or worker that changed or are gone since the record, one line each
  /// (code_changes): the verdict may reflect the change.
  std::vector<std::string> code_changes;
  std::string trace;             ///< where the trace was written; empty: none asked for
  std::vector<std::string> log;  ///< what was done, in order, for humans
  /// 0 when the case reproduced and met its expectation; 1 otherwise.
  int exit_code() const;
};

/// Progress callback: one line per step (may be null).
using ReplayProgress = void (*)(const std::string& line, void* user);

/// Runs the replay. Throws UsageError for a bad --db, --case or --worker.
ReplayReport replay_case(const ReplayOptions& options, ReplayProgress progress = nullptr,
                         void* user = nullptr);

}  // namespace cprr

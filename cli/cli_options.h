#pragma once
// Command-line pieces cprecord and cpreplay (commands/) share, so both tools declare an option
// once, reject bad values with the same words and answer --version.
#include <optional>
#include <string>
#include <string_view>

#include "data/launch_options.h"
#include "recorder/engine/world_handle.h"

// CLI11 is declared, not included: it is costly to compile (its validators are objects every
// file that includes it builds), and most files that include this one parse no command line.
namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI

namespace cprr {

class InterruptWatch;
struct ControllerConfig;

/// What cprecord and cpreplay both take and hand to their controller alike (RecordOptions::shared,
/// ReplayOptions::shared): declared once below, checked by check_shared, applied by apply_shared.
struct SharedOptions {
  /// --worker; empty: cprecord's cpworker (cprr-pyworker) beside it, cpreplay's the recorded one.
  std::string worker;
  /// --trace: cprecord's directory, cpreplay's file; non-empty: ranks time every op.
  std::string trace;
  /// --timeout, --standby, --collectives (unset: cprecord's auto, cpreplay's the record's) and
  /// CPRR_PYTHON_TEMPLATE, as the controller and its worlds take them (WorldSpec::run).
  RunChoices run;
  /// Ctrl-C: when its signal arrives the run or replay stops (its ranks killed). Null: not
  /// interruptible (in-process callers).
  const InterruptWatch* interrupt = nullptr;
};

/// The checks the options' validators make, repeated for in-process callers: --timeout in range,
/// --standby in range. Throws UsageError naming the option.
void check_shared(const SharedOptions& o);

/// Sets what `o` says of the controller: its run choices (whole), the stop descriptor and timing
/// (a trace). The worker is each verb's to resolve.
/// Also names the supervisor a launcher's Python ranks run (cpworker beside this executable).
void apply_shared(const SharedOptions& o, ControllerConfig& config);

/// `name` next to this executable (cpworker, cprr-pyworker), or the bare name when unknown.
std::string beside_self(const char* name);

/// --worker PATH; `unset` completes "worker binary ..." with what leaving it out means.
void add_worker_option(CLI::App& app, std::string& worker, std::string_view unset);

/// --timeout SECONDS: a per-case deadline overriding each case's own.
void add_timeout_option(CLI::App& app, std::optional<double>& timeout_s);

/// --trace `type` (DIR or FILE): time every op and write Chrome traces; `what` says which.
CLI::Option* add_trace_option(CLI::App& app, std::string& trace, std::string_view type,
                              std::string_view what);

/// --timeout: a finite number of seconds in (0, kMaxTimeoutS]; NaN, infinities, zero and
/// negatives are refused with "must be a positive number of seconds".
CLI::Validator seconds_validator();

/// --repeat and similar counts: a whole number of at least 1.
CLI::Validator positive_count_validator();

/// The most jobs --jobs may run at once.
inline constexpr int kMaxJobs = 1024;

/// --jobs: a whole number from 1 to kMaxJobs, or "auto" (read as 0: as many as fit); a word is
/// "not a number", a number outside the range says the range.
CLI::Validator jobs_validator();

/// The most worlds --standby may start ahead.
inline constexpr int kMaxStandby = 64;

/// --standby N, cprecord's and cpreplay's: start the worlds of the next N fresh executions while
/// earlier ones run (RunChoices::standby, Controller::foresee); 0, the default, is off.
/// `which` says which executions come next: each tool knows different ones in advance.
void add_standby_option(CLI::App& app, int& standby, std::string_view which);
/// Throws UsageError naming --standby when N is out of [0, kMaxStandby].
void check_standby(int standby);

/// --collectives auto|nccl|gloo, cprecord's and cpreplay's (RunChoices::collectives), parsed into
/// the request once; `unset` says what leaving it out means.
void add_collectives_option(CLI::App& app, std::optional<CollectivesRequest>& collectives,
                            std::string_view unset);

/// The launcher options as parsed; finish_launch_options checks them together.
struct LaunchFlags {
  std::string launcher = "local";  ///< --launcher
  LaunchOptions options;           ///< every other launcher option
  CLI::Option* launcher_given = nullptr;
  std::vector<CLI::Option*> others;  ///< the options that need --launcher mpirun|srun
};

/// --launcher, --launcher-path, --hosts, --partition, --gpus-per-node, --launcher-arg, --listen,
/// --advertise, --shared-dir, in an option group of their own ("Launcher").
void add_launch_options(CLI::App& app, LaunchFlags& flags);
/// The options as one LaunchOptions; throws UsageError naming the option that does not fit
/// (launcher options without a launcher, --partition with mpirun, a bad --listen or --shared-dir).
LaunchOptions finish_launch_options(const LaunchFlags& flags);

/// The environment variable that turns the Python worker's template process off.
inline constexpr std::string_view kPythonTemplateEnv = "CPRR_PYTHON_TEMPLATE";
/// Whether a Python worker's ranks are forked from a template process that imported torch and
/// the case files once (RunChoices::fork_from_template): CPRR_PYTHON_TEMPLATE unset, empty
/// or "on" says yes, "off" starts every rank afresh. Throws UsageError for any other value.
bool python_template_from_env();

/// `--version`: prints "<tool> <version>" and exits 0; shows every option's default in --help.
void add_common_flags(CLI::App& app, std::string_view tool);

}  // namespace cprr

#include "cli/cli_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/text_forms.h"
#include "recorder/engine/controller.h"
#include "recorder/launch/interrupt.h"
#include "recorder/launch/process.h"
#include "recorder/launch/tcp.h"
#include "runtime/error.h"

namespace cprr {

CLI::Validator seconds_validator() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(in.c_str(), &end);
        if (in.empty() || end == nullptr || *end != '\0')
          return "must be a positive number of seconds";
        return timeout_problem(v);
      },
      "SECONDS");
}

namespace {

// `in` as a whole number, or nullopt for anything else; one too large for a long long reads as
// its limit (strtoll's), which every range here refuses.
std::optional<long long> whole_number(const std::string& in) {
  char* end = nullptr;
  const long long v = std::strtoll(in.c_str(), &end, 10);
  if (in.empty() || *end != '\0') return std::nullopt;
  return v;
}

}  // namespace

CLI::Validator positive_count_validator() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        const std::optional<long long> v = whole_number(in);
        if (!v || *v < 1 || *v > 1'000'000) return "must be a whole number from 1 to 1000000";
        return {};
      },
      "N");
}

CLI::Validator jobs_validator() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        if (in == "auto") {
          in = "0";
          return {};
        }
        const std::optional<long long> v = whole_number(in);
        if (!v) {
          return fmt::format("'{}' is not a number: give N from 1 to {}, or auto", in, kMaxJobs);
        }
        if (*v < 1 || *v > kMaxJobs) {
          return fmt::format(
              "{} is not from 1 to {}: give N in that range, or auto (as many "
              "as the cores or GPUs hold)",
              in, kMaxJobs);
        }
        return {};
      },
      "");
}

void check_shared(const SharedOptions& o) {
  if (const std::optional<double> timeout_s = o.run.timeout_override_s) {
    if (const std::string why = timeout_problem(*timeout_s); !why.empty()) {
      CPRR_THROW_AS(UsageError, "--timeout {}: {}", *timeout_s, why);
    }
  }
  check_standby(o.run.standby);
}

std::string beside_self(const char* name) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? name : (self.parent_path() / name).string();
}

void apply_shared(const SharedOptions& o, ControllerConfig& config) {
  config.run = o.run;
  config.stop_fd = o.interrupt != nullptr ? o.interrupt->fd() : -1;
  config.timeline = !o.trace.empty();
  config.agent_binary = beside_self("cpworker");
}

void add_worker_option(CLI::App& app, std::string& worker, std::string_view unset) {
  app.add_option("--worker", worker, fmt::format("worker binary {}", unset));
}

void add_timeout_option(CLI::App& app, std::optional<double>& timeout_s) {
  app.add_option("--timeout", timeout_s,
                 fmt::format("per-case deadline in seconds, overriding each case's own (default: "
                             "the case's own, else 60; at most {})",
                             kMaxTimeoutS))
      ->check(seconds_validator());
}

CLI::Option* add_trace_option(CLI::App& app, std::string& trace, std::string_view type,
                              std::string_view what) {
  return app
      .add_option("--trace", trace,
                  fmt::format("time every op and write a Chrome trace (Perfetto, chrome://tracing) "
                              "of {}: a process per rank, a track per stream and the host, ops "
                              "with their real start and duration, collectives and races as "
                              "arrows, allocations as instants",
                              what))
      ->type_name(std::string(type));
}

void add_standby_option(CLI::App& app, int& standby, std::string_view which) {
  app.add_option("--standby", standby,
                 fmt::format("start the worlds of the next N {} while earlier ones run, so a "
                             "fresh execution waits less for its world; each stays fresh (runs "
                             "nothing before its case); on cuda each holds a CUDA context and a "
                             "communicator per GPU, its device arena only once its case runs; "
                             "with a launcher, the node agents start them one at a time; 0: off",
                             which))
      ->check(CLI::Range(0, kMaxStandby));
}

void check_standby(int standby) {
  if (standby < 0 || standby > kMaxStandby) {
    CPRR_THROW_AS(UsageError, "--standby {}: must be a whole number from 0 to {}", standby,
                  kMaxStandby);
  }
}

bool python_template_from_env() {
  const char* v = std::getenv(std::string(kPythonTemplateEnv).c_str());
  const std::string_view value = v != nullptr ? v : "";
  if (value.empty() || value == "on") return true;
  if (value == "off") return false;
  CPRR_THROW_AS(UsageError, "{}={}: use on (the default) or off", kPythonTemplateEnv, value);
}

void add_collectives_option(CLI::App& app, std::optional<CollectivesRequest>& collectives,
                            std::string_view unset) {
  // The option's words are request_name's, in the enum's order.
  std::vector<std::pair<std::string, CollectivesRequest>> words;
  for (const CollectivesRequest r :
       {CollectivesRequest::automatic, CollectivesRequest::nccl, CollectivesRequest::gloo}) {
    words.emplace_back(request_name(r), r);
  }
  CLI::Option* option = app.add_option_function<std::string>(
      "--collectives",
      // The check below runs first, so every word here is one of `words`.
      [&collectives, words](const std::string& word) {
        for (const auto& [name, r] : words) {
          if (name == word) collectives = r;
        }
      },
      fmt::format("how a cuda world's collectives travel: auto (NCCL when every rank "
                  "has a GPU of its own; where ranks share a GPU, as W ranks on fewer "
                  "than W GPUs do (rank r on GPU r mod G), Gloo with device buffers "
                  "staged through pinned host memory) | nccl (refused where ranks "
                  "share a GPU) | gloo (staged even with a GPU per rank); recorded per "
                  "execution (collectives, rank_gpus); the cpu backend always uses "
                  "Gloo; unset: {}",
                  unset));
  option->type_name("TEXT")->check(CLI::IsMember(words));
  if (collectives) option->default_str(std::string(request_name(*collectives)));
}

void add_launch_options(CLI::App& app, LaunchFlags& f) {
  const std::string group = "Launcher (ranks on other hosts; README.md 'Many hosts')";
  LaunchOptions& o = f.options;
  f.launcher_given =
      app.add_option("--launcher", f.launcher,
                     "how worlds start their ranks: local (children of this process) | mpirun "
                     "(Open MPI) | srun (Slurm); ranks started by a launcher connect back over TCP "
                     "with a per-run token")
          ->check(CLI::IsMember({"local", "mpirun", "srun"}))
          ->group(group);
  f.others = {
      app.add_option("--launcher-path", o.program,
                     "the launcher's executable (default: mpirun or srun on PATH)")
          ->group(group),
      app.add_option("--hosts", o.hosts,
                     "hosts to run ranks on, comma-separated (mpirun --host, srun --nodelist; "
                     "default: this host for mpirun, the allocation for srun)")
          ->delimiter(',')
          ->group(group),
      app.add_option("--partition", o.partition, "Slurm partition (srun --partition)")
          ->group(group),
      app.add_option("--gpus-per-node", o.gpus_per_node,
                     "ranks (one GPU each) per node: mpirun --map-by ppr:N:node, srun "
                     "--ntasks-per-node=N --gpus-per-node=N")
          ->check(CLI::Range(1, 1024))
          ->group(group),
      app.add_option("--launcher-arg", o.extra,
                     "an argument passed to the launcher as is, before the rank command; repeat "
                     "it for more (write --launcher-arg=--mca when the value starts with '-')")
          ->allow_extra_args(false)
          ->group(group),
      app.add_option("--listen", o.listen,
                     "ADDR[:PORT] where this process listens for its ranks (default: 127.0.0.1 "
                     "when every rank runs on this host, else every interface; any free port)")
          ->group(group),
      app.add_option("--advertise", o.advertise,
                     "host name or address ranks connect back to (default: the --listen address, "
                     "else this host's name)")
          ->group(group),
      app.add_option("--shared-dir", o.shared_dir,
                     "a directory every rank's host sees (the cpu backend's rendezvous and the "
                     "flight records; default: the temp directory, seen by this host only)")
          ->group(group),
  };
}

LaunchOptions finish_launch_options(const LaunchFlags& f) {
  LaunchOptions o = f.options;
  o.kind = parse_launcher(f.launcher).value_or(LauncherKind::local);
  if (o.kind == LauncherKind::local) {
    for (const CLI::Option* opt : f.others) {
      if (opt->count() > 0) {
        CPRR_THROW_AS(UsageError,
                      "{} only means something with --launcher mpirun or --launcher srun",
                      opt->get_name());
      }
    }
    return o;
  }
  if (o.kind == LauncherKind::mpirun && !o.partition.empty()) {
    CPRR_THROW_AS(UsageError,
                  "--partition is Slurm's: use it with --launcher srun, or pass "
                  "mpirun's own options with --launcher-arg");
  }
  const std::string program = o.program.empty() ? std::string(launcher_name(o.kind)) : o.program;
  if (find_on_path(program).empty()) {
    if (!o.program.empty()) {
      CPRR_THROW_AS(UsageError, "--launcher-path {} is not an executable file (nor one on PATH)",
                    program);
    }
    CPRR_THROW_AS(UsageError,
                  "--launcher {}: {} is not on PATH: install it ({}) or pass "
                  "--launcher-path",
                  program, program,
                  o.kind == LauncherKind::mpirun ? "Open MPI; Debian: openmpi-bin"
                                                 : "Slurm's client; Debian: slurm-client");
  }
  if (!o.listen.empty()) parse_endpoint(o.listen, "--listen");
  if (!o.shared_dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(o.shared_dir, ec)) {
      CPRR_THROW_AS(UsageError,
                    "--shared-dir {} is not a directory: give one every rank's host "
                    "sees (e.g. on NFS)",
                    o.shared_dir);
    }
    o.shared_dir = std::filesystem::absolute(o.shared_dir).string();
  }
  return o;
}

void add_common_flags(CLI::App& app, std::string_view tool) {
  app.set_version_flag("--version", std::string(tool) + " " + CPRR_VERSION,
                       "print the version and exit");
  app.option_defaults()->always_capture_default();
}

}  // namespace cprr

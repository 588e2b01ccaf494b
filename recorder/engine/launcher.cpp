#include "recorder/engine/launcher.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/text_forms.h"
#include "recorder/launch/token.h"

namespace cprr {

namespace {

std::vector<std::string> mpirun_args(const LaunchOptions& o, int world_size) {
  std::vector<std::string> a{"-np", std::to_string(world_size)};
  // The supervisors connect back by themselves: mpirun only starts them. The token travels in
  // the environment (-x exports it by name, its value stays off the command line), and ranks
  // are not pinned to cores: they spend their time in their own threads and the GPU.
  a.insert(a.end(), {"-x", kTokenEnv, "--bind-to", "none"});
  if (o.hosts.empty()) {
    // All on this host: more ranks than cores is normal for a test world.
    a.emplace_back("--oversubscribe");
  } else {
    a.insert(a.end(), {"--host", fmt::format("{}", fmt::join(o.hosts, ","))});
  }
  if (o.gpus_per_node > 0) {
    a.insert(a.end(), {"--map-by", fmt::format("ppr:{}:node", o.gpus_per_node)});
  }
  return a;
}

std::vector<std::string> srun_args(const LaunchOptions& o, int world_size) {
  // --kill-on-bad-exit=0: a supervisor never exits badly on its rank's behalf, but a node
  // failure must still leave the other ranks to the controller, which owns every rank's fate.
  std::vector<std::string> a{fmt::format("--ntasks={}", world_size), "--kill-on-bad-exit=0",
                             "--export=ALL"};
  if (!o.hosts.empty()) a.push_back(fmt::format("--nodelist={}", fmt::join(o.hosts, ",")));
  if (!o.partition.empty()) a.push_back("--partition=" + o.partition);
  if (o.gpus_per_node > 0) {
    a.push_back(fmt::format("--ntasks-per-node={}", o.gpus_per_node));
    a.push_back(fmt::format("--gpus-per-node={}", o.gpus_per_node));
  }
  return a;
}

}  // namespace

std::vector<std::string> launcher_argv(const LaunchOptions& o, int world_size,
                                       const std::vector<std::string>& rank_argv) {
  std::vector<std::string> argv{o.program.empty() ? std::string(launcher_name(o.kind)) : o.program};
  const auto own =
      o.kind == LauncherKind::srun ? srun_args(o, world_size) : mpirun_args(o, world_size);
  argv.insert(argv.end(), own.begin(), own.end());
  argv.insert(argv.end(), o.extra.begin(), o.extra.end());
  argv.insert(argv.end(), rank_argv.begin(), rank_argv.end());
  return argv;
}

std::string describe(const LaunchOptions& o) {
  if (o.kind == LauncherKind::local) return "local";
  std::string out(o.program.empty() ? launcher_name(o.kind) : std::string_view(o.program));
  if (!o.hosts.empty()) out += fmt::format(" hosts={}", fmt::join(o.hosts, ","));
  if (!o.partition.empty()) out += " partition=" + o.partition;
  if (o.gpus_per_node > 0) out += fmt::format(" gpus-per-node={}", o.gpus_per_node);
  for (const auto& e : o.extra) out += " " + e;
  return out;
}

}  // namespace cprr

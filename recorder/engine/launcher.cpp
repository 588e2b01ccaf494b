#include "recorder/engine/launcher.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/text_forms.h"
#include "recorder/launch/token.h"
#include "runtime/error.h"
#include "runtime/host_info.h"

namespace cprr {

namespace {

std::vector<std::string> mpirun_args(const LaunchOptions& o, int nodes) {
  std::vector<std::string> a{"-np", std::to_string(nodes)};
  // The agents connect back by themselves: mpirun only starts them. The token travels in the
  // environment (-x exports it by name, its value stays off the command line), and agents are
  // not pinned to cores: their ranks spend their time in their own threads and the GPU.
  a.insert(a.end(), {"-x", kTokenEnv, "--bind-to", "none"});
  if (o.hosts.empty()) {
    a.emplace_back("--oversubscribe");  // one agent on this host, whatever its slots
  } else {
    a.insert(a.end(),
             {"--host", fmt::format("{}", fmt::join(o.hosts, ",")), "--map-by", "ppr:1:node"});
  }
  return a;
}

std::vector<std::string> srun_args(const LaunchOptions& o, int nodes) {
  // --kill-on-bad-exit=0: an agent that dies must leave the other nodes to the controller, which
  // owns every rank's fate and goes on with the nodes left. --cpu-bind=none: the agent's ranks
  // use the node's cores as local ranks would.
  std::vector<std::string> a{fmt::format("--nodes={}", nodes),
                             fmt::format("--ntasks={}", nodes),
                             "--ntasks-per-node=1",
                             "--kill-on-bad-exit=0",
                             "--cpu-bind=none",
                             "--export=ALL"};
  if (!o.hosts.empty()) a.push_back(fmt::format("--nodelist={}", fmt::join(o.hosts, ",")));
  if (!o.partition.empty()) a.push_back("--partition=" + o.partition);
  if (o.gpus_per_node > 0) a.push_back(fmt::format("--gpus-per-node={}", o.gpus_per_node));
  return a;
}

}  // namespace

int agent_nodes(const LaunchOptions& o, std::optional<int> slurm_nodes) {
  if (!o.hosts.empty()) return static_cast<int>(o.hosts.size());
  if (o.kind == LauncherKind::mpirun && !o.all_local()) {
    CPRR_THROW_AS(UsageError,
                  "--launcher mpirun: hosts given through --launcher-arg cannot be counted, and "
                  "cprr starts one node agent per host: name them with --hosts instead");
  }
  if (o.kind == LauncherKind::srun && slurm_nodes && *slurm_nodes > 0) return *slurm_nodes;
  return 1;
}

std::vector<std::string> agents_launcher_argv(const LaunchOptions& o, int nodes,
                                              const std::vector<std::string>& agent_argv) {
  std::vector<std::string> argv{o.program.empty() ? std::string(launcher_name(o.kind)) : o.program};
  const auto own = o.kind == LauncherKind::srun ? srun_args(o, nodes) : mpirun_args(o, nodes);
  argv.insert(argv.end(), own.begin(), own.end());
  argv.insert(argv.end(), o.extra.begin(), o.extra.end());
  argv.insert(argv.end(), agent_argv.begin(), agent_argv.end());
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

Endpoint listen_endpoint(const LaunchOptions& o) {
  if (!o.listen.empty()) return parse_endpoint(o.listen, "--listen");
  // Agents that all run here reach the controller over loopback: no port opens to the network.
  return Endpoint{o.all_local() ? "127.0.0.1" : "0.0.0.0", 0};
}

std::string advertised_host(const LaunchOptions& o, const Endpoint& bound) {
  if (!o.advertise.empty()) return o.advertise;
  if (bound.host != "0.0.0.0" && bound.host != "::") return bound.host;
  return host_name();
}

}  // namespace cprr

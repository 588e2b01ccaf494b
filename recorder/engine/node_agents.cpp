#include "recorder/engine/node_agents.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <set>

#include "recorder/launch/rank_spawner.h"
#include "recorder/launch/token.h"
#include "recorder/launch/wait_text.h"
#include "runtime/env_number.h"

namespace cprr {
namespace {

// What the launcher job's output (its agents' stderr among it) keeps, and what a message quotes.
constexpr std::size_t kJobOutputBytes = 64 * 1024;
constexpr std::size_t kQuotedBytes = 2000;
// A node that drops without closing its connection is noticed by TCP keepalive: probes after
// this much silence, this often, this many times (about 25 s in all).
constexpr int kKeepIdleS = 10;
constexpr int kKeepIntervalS = 5;
constexpr int kKeepProbes = 3;

std::optional<int> slurm_job_nodes() {
  const std::optional<long long> n =
      env_number("SLURM_JOB_NUM_NODES", 1, 1 << 20, "a number of nodes");
  return n ? std::optional<int>(static_cast<int>(*n)) : std::nullopt;
}

void keep_alive(int fd) {
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepIdleS, sizeof kKeepIdleS);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepIntervalS, sizeof kKeepIntervalS);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepProbes, sizeof kKeepProbes);
}

}  // namespace

std::vector<int> place_ranks(int world_size, int live_nodes, int gpus_per_node) {
  if (live_nodes <= 0) {
    CPRR_THROW_AS(NoNodeLeft, "no node agent is left to start a world of {} ranks on", world_size);
  }
  const int per_node =
      gpus_per_node > 0 ? gpus_per_node : (world_size + live_nodes - 1) / live_nodes;
  const int needed = (world_size + per_node - 1) / per_node;
  if (needed > live_nodes) {
    CPRR_THROW_AS(NoNodeLeft,
                  "a world of {} ranks needs {} nodes of {} GPUs (--gpus-per-node), and {} "
                  "node(s) with a live agent are left",
                  world_size, needed, per_node, live_nodes);
  }
  std::vector<int> node(world_size);
  for (int r = 0; r < world_size; ++r) node[r] = r / per_node;
  return node;
}

NodeAgents::NodeAgents(const Config& config, RankListener& listener)
    : launcher_(describe(config.launch)),
      gpus_per_node_(config.launch.gpus_per_node),
      job_output_(kJobOutputBytes) {
  const int nodes = agent_nodes(config.launch, slurm_job_nodes());
  const Endpoint back{advertised_host(config.launch, listener.bound()), listener.bound().port};
  std::vector<std::string> agent_argv{config.program, "--agent", back.str(), "--nodes",
                                      std::to_string(nodes)};
  if (!config.rank_command.empty()) {
    agent_argv.emplace_back("--");
    agent_argv.insert(agent_argv.end(), config.rank_command.begin(), config.rank_command.end());
  }
  int out[2];
  CPRR_SYSCALL(::pipe2(out, O_CLOEXEC));
  UniqueFd out_r(out[0]), out_w(out[1]);
  UniqueFd devnull(CPRR_SYSCALL(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  SpawnSpec spec;
  spec.argv = agents_launcher_argv(config.launch, nodes, agent_argv);
  spec.fds = {{devnull.get(), 0}, {out_w.get(), 1}, {out_w.get(), 2}};
  spec.env = {{kTokenEnv, listener.token()}};  // never on the command line
  spec.search_path = true;
  try {
    job_ = ChildProcess::spawn(spec);  // leads its own group
  } catch (const std::exception& e) {
    CPRR_THROW(
        "cannot start the launcher '{}' for the node agents: is it installed and on PATH? "
        "({})",
        spec.argv[0], e.what());
  }
  out_w.reset();
  job_output_.add(std::move(out_r));
  job_output_.start();
  std::vector<AcceptedAgent> accepted;
  try {
    accepted = listener.accept_agents(
        nodes, std::chrono::steady_clock::now() + config.startup_timeout, config.template_env, [&] {
          if (stop_requested(config.stop_fd)) {
            CPRR_THROW_AS(Interrupted, "interrupted while the node agents were starting");
          }
          if (const auto& e = job_->poll()) {
            CPRR_THROW("the launcher ({}) {} before every node agent connected back", launcher_,
                       e->describe());
          }
        });
  } catch (const Interrupted&) {
    end_job();
    throw;
  } catch (const std::exception& e) {
    end_job();
    CPRR_THROW(
        "the node agents ({} of them, through {}) failed to start: {}; the launcher's "
        "output:\n{}",
        nodes, launcher_, e.what(), launcher_output());
  }
  for (AcceptedAgent& a : accepted) {
    keep_alive(a.fd.get());
    Agent agent;
    agent.fd = std::move(a.fd);
    agent.host = std::move(a.host);
    agent.pid = a.pid;
    agents_.push_back(std::move(agent));
  }
}

NodeAgents::~NodeAgents() {
  // Each agent ends its ranks and its templates when its connection ends, wherever it runs.
  for (Agent& a : agents_) a.fd.reset();
  try {
    end_job();
  } catch (const std::exception&) {
  }
}

void NodeAgents::end_job() {
  if (!job_ || !job_->running()) return;
  // Agents whose connection ended exit by themselves, and the launcher with them; one that
  // never connected (a failed start) is ended by the launcher's TERM.
  job_->wait(agents_.empty() ? 200 : 10000);
  if (job_->running()) job_->signal_group(SIGTERM);
  job_->wait(3000);
  if (job_->running()) job_->signal_group(SIGKILL);
  job_->wait(5000);
  job_->reap();
  job_output_.wait_eof(500);
}

std::string NodeAgents::launcher_output() {
  job_output_.drain_now();
  const std::string text = job_output_.since(0, 0);
  return text.empty() ? "(nothing)" : last_bytes(text, kQuotedBytes);
}

std::string NodeAgents::name(int node) const {
  const Agent& a = agents_[node];
  return fmt::format("the agent of node {} ({}, pid {})", node, a.host, a.pid);
}

void NodeAgents::pump(int node) {
  Agent& a = agents_[node];
  if (!a.gone.empty()) return;
  pollfd p{a.fd.get(), POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return;
  try {
    const FrameReader::Fill fill = a.reader.fill(a.fd.get());
    while (auto frame = a.reader.next()) a.refusals.push_back(decode_rank_not_started(*frame));
    if (fill == FrameReader::Fill::eof) {
      a.gone =
          "ended: its connection closed (the agent exited or was killed, or the launcher "
          "ended it)";
    }
  } catch (const std::exception& e) {
    a.gone = fmt::format("is lost: its connection broke ({}); did the node drop?", e.what());
  }
  if (!a.gone.empty()) a.fd.reset();
}

std::string NodeAgents::gone(int node) {
  std::lock_guard lock(mu_);
  pump(node);
  return agents_[node].gone;
}

std::vector<int> NodeAgents::start_world(
    uint64_t world, int world_size, const std::string& rendezvous, BackendKind backend,
    bool fork_from_template, const std::vector<std::pair<std::string, std::string>>& template_env) {
  std::lock_guard lock(mu_);
  std::vector<int> live;
  for (int n = 0; n < static_cast<int>(agents_.size()); ++n) {
    pump(n);
    if (agents_[n].gone.empty()) live.push_back(n);
  }
  std::vector<int> nodes;
  try {
    nodes = place_ranks(world_size, static_cast<int>(live.size()), gpus_per_node_);
  } catch (const NoNodeLeft& e) {
    std::string lost;  // why each node left the run
    for (int n = 0; n < static_cast<int>(agents_.size()); ++n) {
      if (!agents_[n].gone.empty()) lost += fmt::format("; {} {}", name(n), agents_[n].gone);
    }
    CPRR_THROW_AS(NoNodeLeft, "{}{}; the launcher's output:\n{}", e.what(), lost,
                  launcher_output());
  }
  for (int& n : nodes) n = live[n];
  for (int r = 0; r < world_size; ++r) {
    const int local_rank = static_cast<int>(std::count(nodes.begin(), nodes.begin() + r, nodes[r]));
    const int local_size = static_cast<int>(std::count(nodes.begin(), nodes.end(), nodes[r]));
    const StartRank msg{world,
                        r,
                        world_size,
                        local_rank,
                        local_size,
                        rendezvous,
                        std::string(backend_name(backend)),
                        fork_from_template,
                        template_env};
    try {
      write_frame(agents_[nodes[r]].fd.get(), encode(msg));
    } catch (const std::exception& e) {
      CPRR_THROW("{} could not be asked to start rank {} of world {}: {}", name(nodes[r]), r, world,
                 e.what());
    }
  }
  return nodes;
}

void NodeAgents::check_start(uint64_t world, const std::vector<int>& nodes) {
  std::lock_guard lock(mu_);
  for (const int n : std::set<int>(nodes.begin(), nodes.end())) {
    pump(n);
    Agent& a = agents_[n];
    if (!a.gone.empty()) CPRR_THROW("{} {}", name(n), a.gone);
    for (const RankNotStarted& refusal : a.refusals) {
      if (refusal.world == world) {
        CPRR_THROW("{} could not start rank {}: {}", name(n), refusal.rank, refusal.why);
      }
    }
    a.refusals.clear();  // an earlier world's: that world failed already
  }
}

}  // namespace cprr

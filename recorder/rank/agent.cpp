#include "recorder/rank/agent.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <utility>

#include "recorder/launch/interrupt.h"
#include "recorder/launch/proc_tree.h"
#include "recorder/launch/process.h"
#include "recorder/launch/rank_spawner.h"
#include "recorder/protocol/protocol.h"
#include "recorder/rank/controller_link.h"
#include "runtime/env_number.h"
#include "runtime/error.h"
#include "runtime/host_info.h"

namespace cprr {
namespace {

// How often the loop looks for ended ranks between messages: a rank's end reaches the
// controller within this.
constexpr int kPollMs = 20;
// A template that has not forked a rank by then is stuck (its imports alone take seconds).
constexpr std::chrono::minutes kStartLimit{5};

// The rank a launcher gave this process: OMPI_COMM_WORLD_RANK (Open MPI), SLURM_PROCID (srun),
// PMIX_RANK or PMI_RANK (other PMI launchers), in that order; nullopt when none is set.
std::optional<int> launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMIX_RANK", "PMI_RANK"}) {
    if (const std::optional<long long> n = env_number(name, 0, INT_MAX - 1, "a rank number"))
      return static_cast<int>(*n);
  }
  return std::nullopt;
}

// One rank this agent started: its process and its supervisor channel.
struct Supervised {
  uint64_t world = 0;
  int rank = 0;
  UniqueFd channel;
  FrameReader reader;
  ChildProcess child;
};

class Agent {
 public:
  Agent(const AgentArgs& a, std::string token, int node, InterruptWatch& stop)
      : a_(a), token_(std::move(token)), node_(node), stop_(stop) {}
  ~Agent() { end_all(); }
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  int run();

 private:
  Handshake handshake(uint64_t world, int rank, int size, Channel ch) const {
    return Handshake{token_, world, rank, size, ch, host_name(), static_cast<int32_t>(::getpid())};
  }
  RankSpawner& spawner_for(const StartRank& m);
  void start_rank(const StartRank& m);
  /// Reports ranks that ended and forgets them.
  void report_ended();
  /// Reads rank k's channel: SignalRank frames, or EOF (the controller dropped the rank).
  /// Returns false when the rank was ended and removed.
  bool serve(std::size_t k);
  void end_rank(std::size_t k);
  void end_all();

  const AgentArgs& a_;
  const std::string token_;
  const int node_;
  InterruptWatch& stop_;
  ControllerLink link_;
  DirectSpawner direct_;
  std::map<TemplateCommand, std::unique_ptr<TemplateSpawner>> templates_;
  std::vector<std::unique_ptr<Supervised>> ranks_;
};

RankSpawner& Agent::spawner_for(const StartRank& m) {
  if (!m.fork_from_template || a_.rank_command.empty()) return direct_;
  TemplateCommand command{a_.rank_command.front(),
                          {a_.rank_command.begin() + 1, a_.rank_command.end()},
                          m.template_env};
  std::unique_ptr<TemplateSpawner>& spawner = templates_[command];
  if (!spawner) spawner = std::make_unique<TemplateSpawner>(std::move(command));
  return *spawner;
}

void Agent::start_rank(const StartRank& m) {
  auto s = std::make_unique<Supervised>();
  s->world = m.world;
  s->rank = m.rank;
  try {
    ControllerLink sup =
        open_channel(a_.controller, handshake(m.world, m.rank, m.world_size, Channel::supervisor));
    ControllerLink control =
        open_channel(a_.controller, handshake(m.world, m.rank, m.world_size, Channel::control));
    ControllerLink out =
        open_channel(a_.controller, handshake(m.world, m.rank, m.world_size, Channel::out));
    ControllerLink err =
        open_channel(a_.controller, handshake(m.world, m.rank, m.world_size, Channel::err));
    UniqueFd devnull(CPRR_SYSCALL(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
    const int slot = control_fd_slot();
    SpawnSpec spec;
    spec.argv = a_.rank_command.empty() ? std::vector<std::string>{self_exe()} : a_.rank_command;
    for (std::string& arg : rank_arguments(m.rank, m.world_size, slot, m.rendezvous, m.backend))
      spec.argv.push_back(std::move(arg));
    spec.fds = {{devnull.get(), 0}, {out.fd.get(), 1}, {err.fd.get(), 2}, {control.fd.get(), slot}};
    spec.env = sup.welcome.env;
    spec.env.emplace_back("CPRR_LOCAL_RANK", std::to_string(m.local_rank));
    spec.env.emplace_back("CPRR_LOCAL_SIZE", std::to_string(m.local_size));
    s->child = spawner_for(m).start(
        spec, SpawnLimits{std::chrono::steady_clock::now() + kStartLimit, stop_.fd()});
    s->channel = std::move(sup.fd);
    s->reader = std::move(sup.reader);  // a SignalRank sent right after the Welcome
    // control, out and err close here: the rank holds them now, and their EOF is the rank's.
  } catch (const std::exception& e) {
    try {
      write_frame(link_.fd.get(), encode(RankNotStarted{m.world, m.rank, e.what()}));
    } catch (const std::exception&) {
      // The controller is gone: the loop sees its EOF next.
    }
    return;
  }
  ranks_.push_back(std::move(s));
}

void Agent::report_ended() {
  for (std::size_t k = 0; k < ranks_.size();) {
    Supervised& s = *ranks_[k];
    const auto& exit = s.child.poll();
    if (!exit) {
      ++k;
      continue;
    }
    const ExitInfo ended = *exit;
    end_rank_group(s.child, ranks_.size() == 1);
    try {
      write_frame(s.channel.get(), encode(RankExited{ended}));
    } catch (const std::exception&) {
      // The controller dropped the rank's world meanwhile: there is no one to tell.
    }
    ranks_.erase(ranks_.begin() + static_cast<std::ptrdiff_t>(k));
  }
}

bool Agent::serve(std::size_t k) {
  Supervised& s = *ranks_[k];
  const FrameReader::Fill fill = s.reader.fill(s.channel.get());
  try {
    while (auto frame = s.reader.next()) s.child.signal_group(decode_signal_rank(*frame).signal);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cprr agent: rank %d of world %llu: %s\n", s.rank,
                 static_cast<unsigned long long>(s.world), e.what());
    end_rank(k);
    return false;
  }
  if (fill != FrameReader::Fill::eof) return true;
  end_rank(k);  // the controller let go of the world: its ranks never outlive that
  return false;
}

void Agent::end_rank(std::size_t k) {
  end_rank_group(ranks_[k]->child, ranks_.size() == 1);
  ranks_.erase(ranks_.begin() + static_cast<std::ptrdiff_t>(k));
}

void Agent::end_all() {
  while (!ranks_.empty()) end_rank(ranks_.size() - 1);
  templates_.clear();  // each ends its template's group and reaps it
  kill_each(unowned_trees());
  reap_orphans();
}

int Agent::run() {
  become_subreaper();  // every rank, forked by a template or spawned, is reparented or born here
  link_ = open_channel(a_.controller, handshake(0, node_, a_.nodes, Channel::agent));
  if (!a_.rank_command.empty()) {
    // The run's worlds start from this template unless their environment differs: its imports
    // run while the other nodes connect and the controller plans.
    StartRank first;
    first.fork_from_template = true;
    first.template_env = link_.welcome.env;
    try {
      if (auto* t = dynamic_cast<TemplateSpawner*>(&spawner_for(first))) t->prepare();
    } catch (const std::exception&) {
      // The first StartRank starts it again and reports why it cannot (RankNotStarted).
    }
  }
  while (auto frame = link_.reader.next()) start_rank(decode_start_rank(*frame));
  for (;;) {
    report_ended();
    std::vector<pollfd> fds{{link_.fd.get(), POLLIN, 0}, {stop_.fd(), POLLIN, 0}};
    for (const auto& s : ranks_) fds.push_back(pollfd{s->channel.get(), POLLIN, 0});
    const int n = ::poll(fds.data(), fds.size(), kPollMs);
    if (n < 0 && errno != EINTR) throw_errno(__FILE__, __LINE__, "poll(agent)");
    if (n <= 0) continue;
    if (fds[1].revents != 0) return 3;  // the destructor ends every rank
    // Ranks first, by their channels' positions before any is removed: from the last one down.
    for (std::size_t k = fds.size(); k-- > 2;) {
      if (fds[k].revents != 0) serve(k - 2);
    }
    if (fds[0].revents == 0) continue;
    if (link_.reader.fill(link_.fd.get()) == FrameReader::Fill::eof) return 0;
    while (auto frame = link_.reader.next()) start_rank(decode_start_rank(*frame));
  }
}

}  // namespace

int run_agent(const AgentArgs& a) {
  const std::optional<int> node = a.node ? a.node : launcher_rank();
  CPRR_CHECK(node.has_value(),
             "no node index: pass --node, or start this through a launcher that sets "
             "OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMIX_RANK or PMI_RANK");
  CPRR_CHECK(*node >= 0 && *node < a.nodes,
             "node {} is outside a run of {} nodes: the launcher started more agents than "
             "--nodes",
             *node, a.nodes);
  // The launcher's identity of this agent is no rank's: a rank that read it would take the
  // agent's index among the nodes for its own rank. Its own come from the controller.
  for (const char* name :
       {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_NODE_RANK",
        "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_TASK_PID"}) {
    ::unsetenv(name);
  }
  const std::string token = take_token();  // no rank and no case code ever sees it
  InterruptWatch stop;                     // the launcher's TERM ends the ranks before the agent
  Agent agent(a, token, *node, stop);
  try {
    return agent.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cprr agent (node %d on %s): %s\n", *node, host_name().c_str(), e.what());
    return 2;
  }
}

}  // namespace cprr

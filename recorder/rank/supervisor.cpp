#include "recorder/rank/supervisor.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "recorder/launch/proc_tree.h"
#include "recorder/launch/process.h"
#include "recorder/launch/token.h"
#include "recorder/protocol/protocol.h"
#include "runtime/error.h"

namespace cprr {
namespace {

std::optional<int> int_env(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    CPRR_CHECK(*end == '\0' && n >= 0 && n < INT_MAX, "{}='{}' is not a rank number", name, v);
    return static_cast<int>(n);
  }
  return std::nullopt;
}

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  return ::gethostname(buf, sizeof buf) == 0 ? std::string(buf) : "?";
}

std::string self_exe() {
  std::string buf(PATH_MAX, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size());
  if (n <= 0) throw_errno(__FILE__, __LINE__, "readlink(/proc/self/exe)");
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

// How long a launched rank keeps trying to reach the controller: a node may start the process
// before the controller's listener is reachable through a slow network.
constexpr std::chrono::seconds kConnectTimeout{30};
constexpr int kWelcomeTimeoutMs = 30000;

struct Link {
  UniqueFd fd;
  Welcome welcome;
};

// One authenticated connection: handshake out, welcome in; throws with the controller's reason.
Link open_channel(const SupervisorArgs& a, int rank, Channel ch, const std::string& token) {
  Link link{connect_tcp(a.controller, kConnectTimeout), {}};
  Handshake hs{
      token, a.world, rank, a.world_size, ch, host_name(), static_cast<int32_t>(::getpid())};
  write_frame(link.fd.get(), encode_handshake(hs));
  FrameReader reader;
  const auto frame = read_frame(link.fd.get(), reader, kWelcomeTimeoutMs);
  CPRR_CHECK(frame.has_value(), "the controller at {} closed the connection without an answer",
             a.controller.str());
  link.welcome = decode_welcome(*frame);
  CPRR_CHECK(link.welcome.error.empty(), "the controller at {} refused this rank: {}",
             a.controller.str(), link.welcome.error);
  return link;
}

// Ends the rank's whole process group (what the case spawned included) and reaps the rank; then
// what left the group (a daemon that called setsid) and was reparented here, the subreaper.
void end_group(ChildProcess& child) {
  // The rank, unreaped until after this, keeps the group's id its own.
  child.signal_group(SIGKILL);
  child.wait(5000);
  child.reap();
  kill_each(unowned_trees());
}

}  // namespace

std::optional<int> launcher_rank() {
  return int_env({"OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMIX_RANK", "PMI_RANK"});
}

std::optional<int> launcher_local_rank() {
  return int_env({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"});
}

std::optional<int> launcher_local_size() {
  return int_env({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"});
}

int supervise(const SupervisorArgs& a) {
  const std::optional<int> rank = a.rank ? a.rank : launcher_rank();
  CPRR_CHECK(rank.has_value(),
             "no rank: pass --rank, or start this through a launcher that sets "
             "OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMIX_RANK or PMI_RANK");
  CPRR_CHECK(*rank < a.world_size,
             "rank {} is outside a world of {}: the launcher started more "
             "processes than --world-size",
             *rank, a.world_size);
  const char* token_env = std::getenv(kTokenEnv);
  CPRR_CHECK(token_env != nullptr && *token_env != '\0',
             "{} is not set: the launcher must pass the run's token in the environment "
             "(mpirun -x {}; srun exports it by default)",
             kTokenEnv, kTokenEnv);
  const std::string token = token_env;
  ::unsetenv(kTokenEnv);  // the rank and the case code never see it

  Link sup = open_channel(a, *rank, Channel::supervisor, token);
  Link control = open_channel(a, *rank, Channel::control, token);
  Link out = open_channel(a, *rank, Channel::out, token);
  Link err = open_channel(a, *rank, Channel::err, token);

  UniqueFd devnull(CPRR_SYSCALL(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  const int slot = control_fd_slot();
  SpawnSpec spec;
  spec.argv = a.rank_command.empty() ? std::vector<std::string>{self_exe()} : a.rank_command;
  for (std::string arg :
       {std::string("--rank"), std::to_string(*rank), std::string("--world-size"),
        std::to_string(a.world_size), std::string("--control-fd"), std::to_string(slot),
        std::string("--rendezvous"), a.rendezvous, std::string("--backend"), a.backend}) {
    spec.argv.push_back(std::move(arg));
  }
  spec.fds = {{devnull.get(), 0}, {out.fd.get(), 1}, {err.fd.get(), 2}, {control.fd.get(), slot}};
  spec.env = sup.welcome.env;
  if (const auto local = launcher_local_rank()) {
    spec.env.emplace_back("CPRR_LOCAL_RANK", std::to_string(*local));
  }
  if (const auto local_size = launcher_local_size()) {
    spec.env.emplace_back("CPRR_LOCAL_SIZE", std::to_string(*local_size));
  }
  become_subreaper();  // what the rank leaves when it ends comes here, not to init
  ChildProcess child = ChildProcess::spawn(spec);  // leads its own group
  control.fd.reset();  // the rank holds them now: their EOF is the rank's
  out.fd.reset();
  err.fd.reset();

  FrameReader reader;
  for (;;) {
    if (const auto& exit = child.poll()) {
      const ExitInfo ended = *exit;
      end_group(child);
      try {
        write_frame(sup.fd.get(), encode(RankExited{ended}));
      } catch (const std::exception&) {
        return 3;  // the controller is gone; there is no one to tell
      }
      return 0;
    }
    pollfd p{sup.fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    if (reader.fill(sup.fd.get()) == FrameReader::Fill::eof) {
      end_group(child);  // the controller went away: its ranks never outlive it
      return 3;
    }
    while (auto frame = reader.next()) {
      const SignalRank sig = decode_signal_rank(*frame);
      child.signal_group(sig.signal);
    }
  }
}

}  // namespace cprr

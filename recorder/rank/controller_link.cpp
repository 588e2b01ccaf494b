#include "recorder/rank/controller_link.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "recorder/launch/proc_tree.h"
#include "recorder/launch/token.h"
#include "runtime/error.h"

namespace cprr {
namespace {

// How long a launched process keeps trying to reach the controller: a node may start it before
// the controller's listener is reachable through a slow network.
constexpr std::chrono::seconds kConnectTimeout{30};
constexpr int kWelcomeTimeoutMs = 30000;

}  // namespace

std::string self_exe() {
  std::string buf(PATH_MAX, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size());
  if (n <= 0) throw_errno(__FILE__, __LINE__, "readlink(/proc/self/exe)");
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

std::string take_token() {
  const char* token_env = std::getenv(kTokenEnv);
  CPRR_CHECK(token_env != nullptr && *token_env != '\0',
             "{} is not set: the launcher must pass the run's token in the environment "
             "(mpirun -x {}; srun exports it by default)",
             kTokenEnv, kTokenEnv);
  const std::string token = token_env;
  ::unsetenv(kTokenEnv);
  return token;
}

ControllerLink open_channel(const Endpoint& controller, const Handshake& hs) {
  ControllerLink link{connect_tcp(controller, kConnectTimeout), {}, {}};
  write_frame(link.fd.get(), encode_handshake(hs));
  const auto frame = read_frame(link.fd.get(), link.reader, kWelcomeTimeoutMs);
  CPRR_CHECK(frame.has_value(), "the controller at {} closed the connection without an answer",
             controller.str());
  link.welcome = decode_welcome(*frame);
  CPRR_CHECK(link.welcome.error.empty(), "the controller at {} refused this {}: {}",
             controller.str(), hs.channel == Channel::agent ? "agent" : "rank", link.welcome.error);
  return link;
}

void end_rank_group(ChildProcess& child, bool sweep_orphans) {
  // The rank, unreaped until after this, keeps the group's id its own.
  const pid_t group = child.pid();
  child.signal_group(SIGKILL);
  child.wait(5000);
  child.reap();
  kill_each(unowned_trees(sweep_orphans ? -1 : group));
}

}  // namespace cprr

#include "recorder/engine/rank_listener.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>

#include "recorder/launch/token.h"
#include "recorder/protocol/protocol.h"
#include "runtime/error.h"

namespace cprr {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A handshake is a few hundred bytes; a longer first frame is no cprr rank.
constexpr std::size_t kMaxHandshakeBytes = 4096;
// A peer that connects and says nothing is dropped after this, so it cannot hold a slot.
constexpr std::chrono::seconds kHandshakeTimeout{10};

uint32_t frame_length(std::string_view b) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(b[i])) << (8 * i);
  return v;
}

constexpr std::array<const char*, 5> kChannelNames{"control", "stdout", "stderr", "supervisor",
                                                   "agent"};

}  // namespace

RankListener::RankListener(const Endpoint& at, std::string token,
                           std::function<void(const std::string&)> refused)
    : fd_(listen_tcp(at)),
      bound_(local_endpoint(fd_.get())),
      token_(std::move(token)),
      refused_(std::move(refused)) {}

void RankListener::accept_new() {
  for (;;) {
    const int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN) return;
      throw_errno(__FILE__, __LINE__, "accept4(rank listener)");
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    UniqueFd conn(fd);
    std::string peer = peer_name(fd);
    pending_.push_back(Pending{std::move(conn), std::move(peer), {}, SteadyClock::now()});
  }
}

std::string RankListener::read_handshake(Pending& p) {
  char buf[1024];
  for (;;) {
    const ssize_t n = ::read(p.fd.get(), buf, sizeof buf);
    if (n > 0) {
      p.bytes.append(buf, static_cast<std::size_t>(n));
      if (p.bytes.size() > kMaxHandshakeBytes + 4) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    CPRR_THROW("it closed the connection before a complete handshake");
  }
  if (p.bytes.size() >= 4) {
    const uint32_t len = frame_length(p.bytes);
    CPRR_CHECK(len <= kMaxHandshakeBytes, "its first frame is {} bytes, no handshake", len);
    if (p.bytes.size() >= 4 + len) {
      CPRR_CHECK(p.bytes.size() == 4 + len, "it sent more than a handshake before the answer");
      return p.bytes.substr(4, len);
    }
  }
  CPRR_CHECK(SteadyClock::now() - p.since < kHandshakeTimeout, "no handshake within {} s",
             kHandshakeTimeout.count());
  return {};
}

void RankListener::refuse(Pending& p, const std::string& why) {
  ++refused_count_;
  try {
    write_frame(p.fd.get(), encode(Welcome{why, {}}));
  } catch (const std::exception&) {
  }
  p.fd.reset();
  if (refused_) refused_(fmt::format("refused a rank connection from {}: {}", p.peer, why));
}

void RankListener::accept_until(const std::function<bool()>& done, SteadyClock::time_point deadline,
                                const std::function<void()>& on_deadline,
                                const std::function<std::string(Handshake&, UniqueFd&)>& take,
                                const std::function<void()>& check) {
  while (!done()) {
    check();
    if (SteadyClock::now() >= deadline) on_deadline();
    std::vector<pollfd> fds{{fd_.get(), POLLIN, 0}};
    for (const Pending& p : pending_) fds.push_back(pollfd{p.fd.get(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 50);  // short: check() also watches the launcher
    if ((fds[0].revents & POLLIN) != 0) accept_new();
    for (Pending& p : pending_) {
      std::string frame;
      Handshake hs;
      try {
        frame = read_handshake(p);
        if (frame.empty()) continue;
        hs = decode_handshake(frame);
      } catch (const std::exception& e) {
        refuse(p, e.what());
        continue;
      }
      // The token first: an unauthenticated peer learns nothing about the worlds.
      if (!tokens_equal(hs.token, token_)) {
        refuse(p, "wrong token (CPRR_TOKEN is not this run's)");
        continue;
      }
      if (std::string why = take(hs, p.fd); !why.empty()) refuse(p, why);
    }
    std::erase_if(pending_, [](const Pending& p) { return !p.fd; });
  }
}

namespace {

// Answers an accepted connection; false when it went away meanwhile (it will miss the deadline
// or connect again).
bool welcome(UniqueFd& fd, const Welcome& w) {
  try {
    write_frame(fd.get(), encode(w));
    return true;
  } catch (const std::exception&) {
    fd.reset();
    return false;
  }
}

}  // namespace

std::vector<AcceptedRank> RankListener::accept_world(uint64_t world, int world_size,
                                                     SteadyClock::time_point deadline,
                                                     const std::function<Env(int)>& env_of,
                                                     const std::function<void()>& check) {
  std::vector<AcceptedRank> ranks(world_size);
  int open = 0;
  const int needed = 4 * world_size;
  const auto on_deadline = [&] {
    std::string missing;
    for (int r = 0; r < world_size; ++r) {
      if (!ranks[r].control || !ranks[r].out || !ranks[r].err || !ranks[r].supervisor) {
        missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
      }
    }
    CPRR_THROW("rank(s) {} of world {} did not connect back to {}", missing, world, bound_.str());
  };
  const auto take = [&](Handshake& hs, UniqueFd& fd) -> std::string {
    if (hs.channel == Channel::agent || hs.world != world || hs.world_size != world_size ||
        hs.rank < 0 || hs.rank >= world_size) {
      return fmt::format(
          "{} {} of world {} (size {}) is not a rank of the starting world {} (size {}): a late "
          "rank of an earlier world, or an agent that came too late?",
          hs.channel == Channel::agent ? "agent" : "rank", hs.rank, hs.world, hs.world_size, world,
          world_size);
    }
    AcceptedRank& r = ranks[hs.rank];
    UniqueFd* slot = std::array<UniqueFd*, 4>{&r.control, &r.out, &r.err,
                                              &r.supervisor}[static_cast<int>(hs.channel)];
    if (*slot) {
      return fmt::format("duplicate {} connection for rank {} of world {}",
                         kChannelNames[static_cast<int>(hs.channel)], hs.rank, world);
    }
    Welcome w;
    if (hs.channel == Channel::supervisor) {
      w.env = env_of(hs.rank);
      r.host = hs.host;
      r.pid = hs.pid;
    }
    // Raw output channels and the supervisor's are read non-blocking; the control channel too
    // (the world reads every channel with poll, as it does a socketpair).
    if (welcome(fd, w)) {
      *slot = std::move(fd);
      ++open;
    }
    return {};
  };
  accept_until([&] { return open == needed; }, deadline, on_deadline, take, check);
  return ranks;
}

std::vector<AcceptedAgent> RankListener::accept_agents(int nodes, SteadyClock::time_point deadline,
                                                       const Env& template_env,
                                                       const std::function<void()>& check) {
  std::vector<AcceptedAgent> agents(nodes);
  int open = 0;
  const auto on_deadline = [&] {
    std::string missing;
    for (int n = 0; n < nodes; ++n) {
      if (!agents[n].fd) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", n);
    }
    CPRR_THROW("the agent(s) of node(s) {} did not connect back to {}", missing, bound_.str());
  };
  const auto take = [&](Handshake& hs, UniqueFd& fd) -> std::string {
    if (hs.channel != Channel::agent || hs.world != 0 || hs.world_size != nodes || hs.rank < 0 ||
        hs.rank >= nodes) {
      return fmt::format("{} of world {} (size {}) is not one of the run's {} node agents",
                         hs.channel == Channel::agent ? "an agent" : "a rank", hs.world,
                         hs.world_size, nodes);
    }
    AcceptedAgent& a = agents[hs.rank];
    if (a.fd) return fmt::format("a second agent for node {} (the first: {})", hs.rank, a.host);
    if (welcome(fd, Welcome{{}, template_env})) {
      a.fd = std::move(fd);
      a.host = hs.host;
      a.pid = hs.pid;
      ++open;
    }
    return {};
  };
  accept_until([&] { return open == nodes; }, deadline, on_deadline, take, check);
  return agents;
}

}  // namespace cprr

#pragma once
// Where launched ranks connect back: a TCP listener owned by the controller for the whole run.
// Each connection must open with a Handshake carrying the run's token, this protocol version, the
// starting world's id, a rank inside it and a channel that rank has not opened yet; anything else
// is refused (a Welcome naming why, then the connection closed) and reported, and nothing it sent
// reaches a world.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "recorder/launch/tcp.h"
#include "recorder/protocol/protocol.h"
#include "runtime/fd.h"

namespace cprr {

/// One launched rank's four authenticated connections.
struct AcceptedRank {
  UniqueFd control, out, err, supervisor;
  std::string host;  ///< the host name it gave
  int32_t pid = 0;   ///< its supervisor's pid there
};

/// A node agent's authenticated connection (Channel::agent).
struct AcceptedAgent {
  UniqueFd fd;
  std::string host;  ///< the host name it gave
  int32_t pid = 0;   ///< its pid there
};

class RankListener {
 public:
  using Env = std::vector<std::pair<std::string, std::string>>;
  /// Listens on `at` with the run's `token`; `refused` is told of every refused connection (one
  /// line: who, and why).
  RankListener(const Endpoint& at, std::string token,
               std::function<void(const std::string&)> refused);

  /// The address it is bound to (port resolved).
  const Endpoint& bound() const { return bound_; }
  const std::string& token() const { return token_; }
  /// Connections refused so far.
  int refused_count() const { return refused_count_; }

  /// Accepts until each of the `world_size` ranks of world `world` opened its four channels.
  /// `env_of(rank)` is what a rank's supervisor is welcomed with. `check` runs every round and
  /// throws to give up (the launcher ended, the user interrupted); at `deadline` it throws
  /// naming the ranks still missing.
  std::vector<AcceptedRank> accept_world(uint64_t world, int world_size,
                                         std::chrono::steady_clock::time_point deadline,
                                         const std::function<Env(int)>& env_of,
                                         const std::function<void()>& check);

  /// Accepts until each of the run's `nodes` agents (engine/node_agents.h) connected, as
  /// accept_world does; each is welcomed with `template_env`. Index = node.
  std::vector<AcceptedAgent> accept_agents(int nodes,
                                           std::chrono::steady_clock::time_point deadline,
                                           const Env& template_env,
                                           const std::function<void()>& check);

 private:
  struct Pending {
    UniqueFd fd;
    std::string peer;
    std::string bytes;
    std::chrono::steady_clock::time_point since;
  };
  void accept_new();
  /// Reads a pending connection; returns its handshake frame once complete, "" while partial.
  /// Throws (the reason for refusing it) on EOF, an oversized frame or a silent peer.
  std::string read_handshake(Pending& p);
  void refuse(Pending& p, const std::string& why);
  /// The accept loop both accepts share: until done(), every authenticated handshake goes to
  /// `take`, which takes the connection (moving the descriptor) or returns why it is refused;
  /// `on_deadline` throws at `deadline`, `check` runs every round.
  void accept_until(const std::function<bool()>& done,
                    std::chrono::steady_clock::time_point deadline,
                    const std::function<void()>& on_deadline,
                    const std::function<std::string(Handshake&, UniqueFd&)>& take,
                    const std::function<void()>& check);

  UniqueFd fd_;
  Endpoint bound_;
  std::string token_;
  std::function<void(const std::string&)> refused_;
  std::vector<Pending> pending_;
  int refused_count_ = 0;
};

}  // namespace cprr

#pragma once
// TCP for ranks started by a launcher (mpirun, srun): the controller listens, each rank's
// supervisor connects back. Plain sockets, close-on-exec; no shell, no name service beyond
// getaddrinfo.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/fd.h"

namespace cprr {

/// A host and a port. An empty host or "0.0.0.0" when listening: every IPv4 interface.
struct Endpoint {
  std::string host;
  uint16_t port = 0;
  /// "host:port" ("[v6]:port" for an IPv6 literal).
  std::string str() const;
};

/// Parses "HOST:PORT", "HOST" (port 0) or "[V6]:PORT". `what` names the input in the error
/// (e.g. "--listen"); a UsageError says what form is expected.
Endpoint parse_endpoint(std::string_view text, std::string_view what);

/// A listening socket bound to `at` (port 0: any free port), close-on-exec and non-blocking.
/// Throws naming the address when it cannot bind (in use, not this host's).
UniqueFd listen_tcp(const Endpoint& at);
/// The address a listening or connected socket is bound to, port resolved.
Endpoint local_endpoint(int fd);
/// "address:port" of the other end of a connected socket ("?" when unknown).
std::string peer_name(int fd);

/// Connects to `to`, trying every address getaddrinfo gives and retrying refused connections
/// until `timeout` (the controller may still be starting its listener on a slow node). The socket
/// is blocking and close-on-exec. Throws naming the endpoint and the last error.
UniqueFd connect_tcp(const Endpoint& to, std::chrono::milliseconds timeout);

}  // namespace cprr

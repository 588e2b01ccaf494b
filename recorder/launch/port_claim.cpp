#include "recorder/launch/port_claim.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <optional>

#include "runtime/env_number.h"
#include "runtime/error.h"

namespace cprr {
namespace {

constexpr int kTries = 1000;
constexpr int kHighestPort = 65535;

// The claim: binds the abstract name for `port`; an invalid fd when another process has it.
UniqueFd claim_name(int port) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) CPRR_THROW("socket(AF_UNIX) for a port claim: {}", std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = "cprr-master-port-" + std::to_string(port);
  // Abstract namespace: sun_path starts with a NUL and the name is not NUL-terminated.
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    if (errno == EADDRINUSE) return UniqueFd();
    CPRR_THROW("bind of the claim for port {}: {}", port, std::strerror(errno));
  }
  return fd;
}

// Whether a TCP listener could bind `port` on every interface now, IPv4 and IPv6 (TCPStore tries
// IPv6 first). SO_REUSEADDR as TCPStore sets it: a port whose last connection lingers in
// TIME_WAIT is free for a listener. A host without IPv6 is probed on IPv4 alone.
bool tcp_free(int port) {
  UniqueFd v4(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!v4) CPRR_THROW("socket(AF_INET) to probe port {}: {}", port, std::strerror(errno));
  const int on = 1;
  ::setsockopt(v4.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in a4{};
  a4.sin_family = AF_INET;
  a4.sin_addr.s_addr = htonl(INADDR_ANY);
  a4.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(v4.get(), reinterpret_cast<const sockaddr*>(&a4), sizeof a4) != 0) return false;
  v4.reset();
  UniqueFd v6(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!v6) {
    if (errno == EAFNOSUPPORT) return true;  // no IPv6 on this host
    CPRR_THROW("socket(AF_INET6) to probe port {}: {}", port, std::strerror(errno));
  }
  ::setsockopt(v6.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  const int v6_only = 1;  // the IPv4 side was probed above
  ::setsockopt(v6.get(), IPPROTO_IPV6, IPV6_V6ONLY, &v6_only, sizeof v6_only);
  sockaddr_in6 a6{};
  a6.sin6_family = AF_INET6;
  a6.sin6_addr = in6addr_any;
  a6.sin6_port = htons(static_cast<uint16_t>(port));
  return ::bind(v6.get(), reinterpret_cast<const sockaddr*>(&a6), sizeof a6) == 0 ||
         errno == EADDRNOTAVAIL;  // IPv6 configured off
}

}  // namespace

int master_port_base() {
  for (const char* name : {"CPRR_MASTER_PORT", "MASTER_PORT"}) {
    if (const std::optional<long long> port = env_number(name, 1, kHighestPort, "a port"))
      return static_cast<int>(*port);
  }
  return kDefaultMasterPort;
}

PortClaim PortClaim::first_free(int base, const std::vector<int>& preferred) {
  const auto take = [](int port) -> std::optional<PortClaim> {
    if (port < 1 || port > kHighestPort) return std::nullopt;
    UniqueFd name = claim_name(port);
    if (!name || !tcp_free(port)) return std::nullopt;
    return PortClaim(std::move(name), port);
  };
  for (int port : preferred) {
    if (auto claim = take(port)) return std::move(*claim);
  }
  for (int port = base; port < base + kTries && port <= kHighestPort; ++port) {
    if (auto claim = take(port)) return std::move(*claim);
  }
  CPRR_THROW(
      "no free port for MASTER_PORT among {} to {}: other cprr runs or other services hold "
      "them all; set CPRR_MASTER_PORT to another base",
      base, std::min(base + kTries - 1, kHighestPort));
}

std::vector<PortClaim> claim_ports(int n, int base) {
  std::vector<PortClaim> claims;
  claims.reserve(static_cast<std::size_t>(n));
  // Each claim holds its name, so the next search passes over it.
  for (int k = 0; k < n; ++k) claims.push_back(PortClaim::first_free(base));
  return claims;
}

}  // namespace cprr

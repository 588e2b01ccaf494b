#include "recorder/launch/tcp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "runtime/error.h"

namespace cprr {
namespace {

// getaddrinfo's answers, freed on every way out.
struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list != nullptr) ::freeaddrinfo(list);
  }
};

AddrInfo resolve(const Endpoint& e, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string port = std::to_string(e.port);
  const bool any = e.host.empty() || e.host == "0.0.0.0";
  AddrInfo out;
  if (passive && any) hints.ai_family = AF_INET;
  const int rc =
      ::getaddrinfo(any && passive ? nullptr : e.host.c_str(), port.c_str(), &hints, &out.list);
  if (rc != 0) {
    CPRR_THROW("cannot resolve '{}': {}", e.str(), ::gai_strerror(rc));
  }
  return out;
}

std::string numeric(const sockaddr* sa, socklen_t len, uint16_t* port) {
  char host[NI_MAXHOST] = "?";
  char serv[NI_MAXSERV] = "0";
  if (::getnameinfo(sa, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  if (port != nullptr) *port = static_cast<uint16_t>(std::stoi(serv));
  return host;
}

}  // namespace

std::string Endpoint::str() const {
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}{}{}:{}", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

Endpoint parse_endpoint(std::string_view text, std::string_view what) {
  const auto bad = [&](std::string_view why) {
    CPRR_THROW_AS(UsageError, "{} '{}' {}: give HOST, HOST:PORT or [IPV6]:PORT", what, text, why);
  };
  Endpoint e;
  std::string_view port;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string_view::npos) bad("has no closing ']'");
    e.host = std::string(text.substr(1, close - 1));
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) bad("has text after ']'");
    if (!rest.empty()) port = rest.substr(1);
  } else {
    const auto colon = text.rfind(':');
    if (colon != std::string_view::npos && text.find(':') != colon) bad("is an IPv6 address");
    e.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) port = text.substr(colon + 1);
  }
  if (text.find_first_of(" \t\n") != std::string_view::npos) bad("holds white space");
  if (!port.empty() || text.ends_with(':')) {
    unsigned value = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || value > 65535) bad("has a port that is no number in 0..65535");
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (port.empty() || value > 65535) bad("has a port that is no number in 0..65535");
    e.port = static_cast<uint16_t>(value);
  }
  return e;
}

UniqueFd listen_tcp(const Endpoint& at) {
  AddrInfo ai = resolve(at, true);
  std::string last = "no address";
  for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (fd.get() < 0) {
      last = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), 128) == 0) {
      return fd;
    }
    last = std::strerror(errno);
  }
  CPRR_THROW("cannot listen on {}: {}: pick another address or port with --listen", at.str(), last);
}

Endpoint local_endpoint(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  CPRR_SYSCALL(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len));
  Endpoint e;
  e.host = numeric(reinterpret_cast<sockaddr*>(&ss), len, &e.port);
  return e;
}

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  Endpoint e;
  e.host = numeric(reinterpret_cast<sockaddr*>(&ss), len, &e.port);
  return e.str();
}

UniqueFd connect_tcp(const Endpoint& to, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  for (;;) {
    AddrInfo ai = resolve(to, false);
    for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
      UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0));
      if (fd.get() < 0) {
        last = std::strerror(errno);
        continue;
      }
      int rc;
      do {
        rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
      } while (rc != 0 && errno == EINTR);
      if (rc == 0) {
        const int one = 1;  // frames are small and answered: no Nagle delay
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
      }
      last = std::strerror(errno);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CPRR_THROW(
      "cannot connect to the controller at {}: {} (is cprecord still running, and is "
      "the address reachable from this host?)",
      to.str(), last);
}

}  // namespace cprr

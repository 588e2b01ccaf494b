#include "recorder/launch/fork_request.h"

#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "runtime/error.h"

namespace cprr {
namespace {

void put_field(std::string& out, std::string_view field, std::string_view what) {
  CPRR_CHECK(field.find('\0') == std::string_view::npos,
             "fork request: {} '{}' holds a NUL byte, which cannot reach the rank", what,
             field.substr(0, field.find('\0')));
  out.append(field);
  out.push_back('\0');
}

void put_number(std::string& out, long long n) { put_field(out, std::to_string(n), "a number"); }

// Sends `bytes` whole; the descriptors ride on the first sendmsg (SCM_RIGHTS), the rest follows.
void send_with_fds(int socket, std::string_view bytes, const std::vector<int>& fds) {
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()), 0);
  std::size_t done = 0;
  while (done < bytes.size()) {
    iovec iov{const_cast<char*>(bytes.data() + done), bytes.size() - done};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (done == 0 && !fds.empty()) {
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    // MSG_NOSIGNAL: a template that died is an error here (EPIPE), not a SIGPIPE.
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(__FILE__, __LINE__, "sendmsg(fork request)");
    done += static_cast<std::size_t>(n);
  }
}

// The NUL-terminated fields of a payload; throws when the last one is not terminated.
std::vector<std::string_view> fields_of(std::string_view payload) {
  if (payload.empty() || payload.back() != '\0') {
    CPRR_THROW_AS(ProtocolError, "fork reply of {} bytes does not end its last field with a NUL",
                  payload.size());
  }
  std::vector<std::string_view> out;
  for (std::size_t at = 0; at < payload.size();) {
    const std::size_t nul = payload.find('\0', at);
    out.push_back(payload.substr(at, nul - at));
    at = nul + 1;
  }
  return out;
}

}  // namespace

std::string encode_fork_request(const ForkRequest& r) {
  CPRR_CHECK(!r.argv.empty(), "fork request without argv");
  CPRR_CHECK(r.fds.size() <= kMaxForkDescriptors,
             "fork request with {} descriptors (at most {} travel in one message)", r.fds.size(),
             kMaxForkDescriptors);
  std::string out(4, '\0');  // the length, filled in below
  put_field(out, kForkWire, "the wire's name");
  put_number(out, r.controller);
  put_number(out, r.process_group);
  put_number(out, static_cast<long long>(r.fds.size()));
  for (const auto& [here, there] : r.fds) put_number(out, there);
  put_number(out, static_cast<long long>(r.argv.size()));
  for (const std::string& a : r.argv) put_field(out, a, "argument");
  put_number(out, static_cast<long long>(r.env.size()));
  for (const std::string& e : r.env) {
    CPRR_CHECK(e.find('=') != std::string::npos && e.front() != '=',
               "fork request: environment entry '{}' is no NAME=value", e);
    put_field(out, e, "environment entry");
  }
  const std::size_t payload = out.size() - 4;
  CPRR_CHECK(payload <= kMaxForkFrameBytes,
             "fork request of {} bytes (limit {}): environment too big?", payload,
             kMaxForkFrameBytes);
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((payload >> (8 * i)) & 0xff);
  return out;
}

void send_fork_frame(int socket, std::string_view frame,
                     const std::vector<std::pair<int, int>>& fds) {
  std::vector<int> here;
  for (const auto& [fd, there] : fds) here.push_back(fd);
  send_with_fds(socket, frame, here);
}

ForkReply decode_fork_reply(std::string_view payload) {
  const std::vector<std::string_view> f = fields_of(payload);
  if (f.size() == 2 && f[0] == "pid") {
    pid_t pid = 0;
    const auto [end, ec] = std::from_chars(f[1].data(), f[1].data() + f[1].size(), pid);
    if (ec != std::errc() || end != f[1].data() + f[1].size() || pid <= 0) {
      CPRR_THROW_AS(ProtocolError, "fork reply names pid '{}', which is no process id", f[1]);
    }
    return ForkReply{pid, {}};
  }
  if (f.size() == 2 && f[0] == "error") {
    return ForkReply{0, f[1].empty() ? std::string("(no reason given)") : std::string(f[1])};
  }
  CPRR_THROW_AS(ProtocolError,
                "fork reply of {} field(s) starting '{}' is neither \"pid\" nor \"error\" and "
                "one value",
                f.size(), f.empty() ? std::string_view() : f[0]);
}

}  // namespace cprr

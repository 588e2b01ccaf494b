#pragma once
// The wire between a controller and a template process (recorder/launch/rank_spawner.h): the
// controller asks a process that loaded the worker once (a Python worker: torch and the case
// files imported) to fork one rank process, and the template answers with the rank's pid. One
// request, then its reply, on a SOCK_STREAM socketpair; the rank's descriptors travel with the
// request as SCM_RIGHTS. The template's side is python/cprr/rank/fork_request.py: change the two
// together, with kForkWire.
//
// Both are frames as the control protocol frames its messages (a little-endian uint32 length,
// then that many bytes), here of NUL-terminated fields, numbers in decimal:
//   request  "cprr-fork/1", the controller's pid, the process group to join (0: lead a new
//            one), the number of descriptors and each one's number in the rank (in the order of
//            the SCM_RIGHTS array, which rides on the frame's first byte), argc and each argument
//            (argv[0] first), envc and each "NAME=value" entry (the rank's complete environment:
//            it inherits none of the template's).
//   reply    "pid", the rank's pid  |  "error", what went wrong.
// A request the template cannot read is answered with an error naming what is wrong with it.
#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cprr {

/// The first field of every request: the wire's name and version.
inline constexpr std::string_view kForkWire = "cprr-fork/1";
/// The most descriptors a request hands over (SCM_RIGHTS in one message).
inline constexpr std::size_t kMaxForkDescriptors = 16;
/// The largest request or reply frame either side accepts.
inline constexpr std::size_t kMaxForkFrameBytes = 16u << 20;

/// What the template forks: one rank process as ChildProcess::spawn would have started it.
struct ForkRequest {
  pid_t controller = 0;     ///< the rank waits until it is this process's child
  pid_t process_group = 0;  ///< 0: the rank leads a new group
  /// (descriptor here, its number in the rank): dup2'ed there; the rank holds no other.
  std::vector<std::pair<int, int>> fds;
  std::vector<std::string> argv;  ///< argv[0] first
  std::vector<std::string> env;   ///< "NAME=value", complete
};

/// The template's answer: the rank's pid, or why there is none.
struct ForkReply {
  pid_t pid = 0;
  std::string error;  ///< empty when pid is set
};

/// The request's frame (length and fields). Throws cprr::Error for what cannot travel: a NUL in
/// an argument or an environment entry, an entry without '=', too many descriptors, no argv.
std::string encode_fork_request(const ForkRequest& request);

/// Sends a request's frame (encode_fork_request) on `socket` with the request's descriptors
/// (sendmsg, SCM_RIGHTS). Throws cprr::Error when the socket is broken (the template died).
void send_fork_frame(int socket, std::string_view frame,
                     const std::vector<std::pair<int, int>>& fds);

/// Reads a reply frame's payload. Throws ProtocolError naming what is wrong with a malformed one.
ForkReply decode_fork_reply(std::string_view payload);

}  // namespace cprr

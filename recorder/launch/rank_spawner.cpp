#include "recorder/launch/rank_spawner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "recorder/launch/fork_request.h"
#include "recorder/launch/log_drain.h"
#include "recorder/launch/wait_text.h"
#include "recorder/protocol/protocol.h"
#include "runtime/error.h"
#include "runtime/fd.h"

namespace cprr {
namespace {

// What a template's output keeps, and what a failure quotes of it.
constexpr std::size_t kOutputRingBytes = 16 * 1024;
constexpr std::size_t kOutputQuotedBytes = 2000;
// How often a wait for a reply also checks that the template still runs.
constexpr int kLivenessCheckMs = 100;

std::string joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

std::string quoted_output(const std::string& text) {
  return text.empty() ? "(nothing)" : last_bytes(text, kOutputQuotedBytes);
}

}  // namespace

bool stop_requested(int stop_fd) {
  if (stop_fd < 0) return false;
  pollfd p{stop_fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

ChildProcess DirectSpawner::start(const SpawnSpec& spec, const SpawnLimits&) {
  return ChildProcess::spawn(spec);
}

// A running template. Ending it: its socket closes first (a template waiting for a request
// exits by itself on EOF), then its process group is killed (while it is unreaped its pid, and so
// its group's id, cannot be reused) and it is reaped; so are its intermediate children that its
// end left to this process.
struct TemplateSpawner::Template {
  ChildProcess process;
  UniqueFd socket;
  FrameReader reader;
  LogDrain output{kOutputRingBytes};  // its stdout and stderr, one pipe
  std::string command;                // its command line, for messages

  ~Template() { end(); }

  void end() {
    socket.reset();
    process.wait(200);
    if (process.running()) {
      try {
        process.signal_group(SIGKILL);
      } catch (const std::exception&) {
      }
    }
    process.wait(5000);
    output.wait_eof(200);
    reap_orphans();
  }
};

TemplateSpawner::TemplateSpawner(TemplateCommand command) : command_(std::move(command)) {}

TemplateSpawner::~TemplateSpawner() {
  std::lock_guard lock(mu_);
  template_.reset();
}

pid_t TemplateSpawner::template_pid() {
  std::lock_guard lock(mu_);
  return template_ && template_->process.running() ? template_->process.pid() : -1;
}

std::unique_ptr<TemplateSpawner::Template> TemplateSpawner::launch() const {
  // Before the template exists: its ranks must be reparented here, never to init.
  become_subreaper();
  int sv[2];
  CPRR_SYSCALL(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
  UniqueFd ours(sv[0]), theirs(sv[1]);
  int out[2];
  CPRR_SYSCALL(::pipe2(out, O_CLOEXEC));
  UniqueFd out_r(out[0]), out_w(out[1]);
  UniqueFd devnull(CPRR_SYSCALL(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  // At a high descriptor, as a rank's control channel: what the case files write to a low one
  // at import never reaches the requests.
  const int slot = control_fd_slot();
  SpawnSpec spec;
  spec.argv = {command_.worker};
  spec.argv.insert(spec.argv.end(), command_.worker_args.begin(), command_.worker_args.end());
  spec.argv.push_back("--template");
  spec.argv.push_back(std::to_string(slot));
  spec.fds = {{devnull.get(), 0}, {out_w.get(), 1}, {out_w.get(), 2}, {theirs.get(), slot}};
  spec.env = command_.env;  // leads a process group of its own (process_group 0)
  auto t = std::make_unique<Template>();
  t->command = joined(spec.argv);
  t->process = ChildProcess::spawn(spec);
  t->socket = std::move(ours);
  t->output.add(std::move(out_r));
  t->output.start();
  return t;
}

void TemplateSpawner::prepare() {
  std::lock_guard lock(mu_);
  if (!template_) template_ = launch();
}

ChildProcess TemplateSpawner::start(const SpawnSpec& spec, const SpawnLimits& limits) {
  std::lock_guard lock(mu_);
  ForkRequest request{::getpid(), spec.process_group, spec.fds, spec.argv, child_environment(spec)};
  const std::string frame = encode_fork_request(request);  // what cannot travel is no one's fault
  if (!template_) template_ = launch();
  // The rank is this process's child before its pid arrives: no orphan sweep until it is owned.
  ChildArrival arrival;
  try {
    send_fork_frame(template_->socket.get(), frame, request.fds);
  } catch (const std::exception& e) {
    fail(fmt::format("could not be sent the request ({})", e.what()), true);
  }
  ForkReply reply;
  try {
    reply = decode_fork_reply(await_reply(limits));
  } catch (const ProtocolError& e) {
    fail(fmt::format("answered with something else than a reply ({})", e.what()), true);
  }
  if (!reply.error.empty()) fail("could not fork the rank: " + reply.error, false);
  return arrival.take(reply.pid);
}

std::string TemplateSpawner::await_reply(const SpawnLimits& limits) {
  Template& t = *template_;
  for (;;) {
    if (auto frame = t.reader.next()) return *frame;
    const int left = ms_until(limits.deadline);
    if (left == 0) fail("did not answer before the world's start-up deadline", true);
    pollfd fds[2] = {{t.socket.get(), POLLIN, 0}, {limits.stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, limits.stop_fd >= 0 ? 2 : 1, std::min(left, kLivenessCheckMs));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(__FILE__, __LINE__, "poll(template socket)");
    if (limits.stop_fd >= 0 && (fds[1].revents & POLLIN) != 0) {
      template_.reset();  // a request in flight: what it would do next is unknown
      CPRR_THROW_AS(Interrupted, "interrupted while the template process forked a rank");
    }
    if (fds[0].revents != 0 && t.reader.fill(t.socket.get()) == FrameReader::Fill::eof) {
      fail("closed its socket before it answered", true);
    }
    if (t.process.poll()) fail("ended before it answered", true);
  }
}

void TemplateSpawner::fail(const std::string& why, bool end) {
  Template& t = *template_;
  if (end) t.end();
  const auto& exit = t.process.exit();
  t.output.drain_now();
  const std::string msg = fmt::format(
      "the template process (pid {}: {}) {}{}; its output:\n{}", t.process.pid(), t.command, why,
      exit ? " (" + exit->describe() + ")" : "", quoted_output(t.output.since(0, 0)));
  if (end) template_.reset();  // the next start starts a new one
  CPRR_THROW("{}", msg);
}

}  // namespace cprr

#include "recorder/launch/process.h"

#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_set>

#include "recorder/launch/proc_tree.h"
#include "runtime/error.h"

extern char** environ;

namespace cprr {
namespace {

// RAII wrappers so an error between init and spawn leaks nothing.
struct FileActions {
  posix_spawn_file_actions_t fa;
  FileActions() { posix_spawn_file_actions_init(&fa); }
  ~FileActions() { posix_spawn_file_actions_destroy(&fa); }
};
struct SpawnAttr {
  posix_spawnattr_t attr;
  SpawnAttr() { posix_spawnattr_init(&attr); }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr); }
};

// The children this process's ChildProcess objects own, and how many are on their way to one.
// Process-wide because waitpid() is: reap_orphans() must know every owner in the process, whatever
// thread or object made it, to reap only what nobody owns. Never destroyed, so a ChildProcess
// ending during static destruction still finds it.
struct Children {
  std::mutex mu;
  std::unordered_set<pid_t> owned;
  int arriving = 0;
  bool subreaper = false;
};

Children& children() {
  static Children* c = new Children;
  return *c;
}

// This process's children as /proc lists them: each thread's own (a child belongs to the thread
// that made it; an orphan to the thread it was reparented to). A list taken while children come
// and go may miss one: the next sweep finds it.
std::vector<pid_t> listed_children() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::ifstream in(it->path() / "children");
    for (pid_t pid = 0; in >> pid;) out.push_back(pid);
  }
  return out;
}

void configure(SpawnAttr& sa, pid_t group) {
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, s);
  CPRR_CHECK_RC(posix_spawnattr_setflags(
      &sa.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF));
  CPRR_CHECK_RC(posix_spawnattr_setpgroup(&sa.attr, group));
  CPRR_CHECK_RC(posix_spawnattr_setsigmask(&sa.attr, &none));
  CPRR_CHECK_RC(posix_spawnattr_setsigdefault(&sa.attr, &defaults));
}

// After the dup2s: closes every descriptor above stderr that is no mapping's target, so a child
// (a rank, and through it case code) gets nothing of the parent's by accident. glibc ignores
// EBADF for a close action, so unopened descriptors cost one failing close() each in the child.
void close_unmapped(FileActions& fa, const SpawnSpec& spec, int top) {
  for (int fd = 3; fd < top; ++fd) {
    bool mapped = false;
    for (const auto& m : spec.fds) mapped = mapped || m.second == fd;
    if (!mapped) CPRR_CHECK_RC(posix_spawn_file_actions_addclose(&fa.fa, fd));
  }
  CPRR_CHECK_RC(posix_spawn_file_actions_addclosefrom_np(&fa.fa, top + 1));
}

ExitInfo decode(const siginfo_t& child) {
  ExitInfo info;
  if (child.si_code == CLD_KILLED || child.si_code == CLD_DUMPED) {
    info.signal = child.si_status;
  } else {
    info.exit_code = child.si_status;
  }
  return info;
}

}  // namespace

std::vector<std::string> child_environment(const SpawnSpec& spec) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    const std::string key = kv.substr(0, kv.find('='));
    bool overridden = false;
    for (const auto& [k, v] : spec.env) overridden = overridden || k == key;
    if (!overridden) out.push_back(std::move(kv));
  }
  for (const auto& [k, v] : spec.env) out.push_back(k + "=" + v);
  return out;
}

ChildProcess ChildProcess::spawn(const SpawnSpec& spec) {
  CPRR_CHECK(!spec.argv.empty(), "spawn without argv");
  FileActions fa;
  int top = 2;
  for (const auto& [parent_fd, child_fd] : spec.fds) {
    // glibc clears FD_CLOEXEC when parent_fd == child_fd, so an identity mapping is kept too.
    CPRR_CHECK_RC(posix_spawn_file_actions_adddup2(&fa.fa, parent_fd, child_fd));
    top = std::max(top, child_fd);
  }
  close_unmapped(fa, spec, top);
  SpawnAttr sa;
  configure(sa, spec.process_group);
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env = child_environment(spec);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  ChildArrival arrival;
  pid_t pid = -1;
  const auto spawn = spec.search_path ? posix_spawnp : posix_spawn;
  const int rc = spawn(&pid, argv[0], &fa.fa, &sa.attr, argv.data(), envp.data());
  if (rc != 0) {
    CPRR_THROW("cannot start '{}': {}{}", spec.argv[0], std::strerror(rc),
               spec.search_path ? "" : ": check the path given to --worker");
  }
  return arrival.take(pid);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      exit_(std::move(other.exit_)),
      reaped_(std::exchange(other.reaped_, false)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    this->~ChildProcess();
    pid_ = std::exchange(other.pid_, -1);
    exit_ = std::move(other.exit_);
    reaped_ = std::exchange(other.reaped_, false);
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    wait(-1);
  }
  reap();
}

const std::optional<ExitInfo>& ChildProcess::poll() {
  if (!running()) return exit_;
  // WNOWAIT: learn of the end but leave the zombie, which keeps the pid, and so the id of the
  // group it leads, from being reused until reap().
  siginfo_t child{};
  int r;
  do {
    r = ::waitid(P_PID, static_cast<id_t>(pid_), &child, WEXITED | WNOHANG | WNOWAIT);
  } while (r < 0 && errno == EINTR);
  if (r == 0 && child.si_pid == pid_) exit_ = decode(child);
  if (r < 0 && errno == ECHILD) {  // reaped elsewhere; nothing more to learn, nothing held
    exit_ = ExitInfo{};
    Children& c = children();
    std::lock_guard lock(c.mu);
    c.owned.erase(pid_);
    reaped_ = true;
  }
  return exit_;
}

void ChildProcess::reap() {
  if (pid_ <= 0 || reaped_ || !poll()) return;
  Children& c = children();
  // Reaped and struck off together: once reaped, the pid may be a new child's at once.
  std::lock_guard lock(c.mu);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  c.owned.erase(pid_);
  reaped_ = true;
}

void ChildProcess::signal_group(int sig) {
  if (held()) cprr::signal_group(pid_, sig);
}

const std::optional<ExitInfo>& ChildProcess::wait(int timeout_ms) {
  // Polling with short sleeps keeps this free of SIGCHLD handlers (no global signal state).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!poll() && (timeout_ms < 0 || std::chrono::steady_clock::now() < deadline)) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return exit_;
}

ChildArrival::ChildArrival() {
  Children& c = children();
  std::lock_guard lock(c.mu);
  ++c.arriving;
}

ChildArrival::~ChildArrival() {
  if (taken_) return;
  Children& c = children();
  std::lock_guard lock(c.mu);
  --c.arriving;
}

ChildProcess ChildArrival::take(pid_t pid) {
  CPRR_CHECK(!taken_ && pid > 0, "ChildArrival::take({}) {}", pid,
             taken_ ? "after a child was taken already" : "is no process id");
  Children& c = children();
  std::lock_guard lock(c.mu);
  c.owned.insert(pid);
  --c.arriving;
  taken_ = true;
  return ChildProcess(pid);
}

void become_subreaper() {
  Children& c = children();
  std::lock_guard lock(c.mu);
  if (c.subreaper) return;
  CPRR_SYSCALL(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0));
  c.subreaper = true;
}

int reap_orphans() {
  Children& c = children();
  std::lock_guard lock(c.mu);
  // While a child arrives it cannot be told from an orphan: leave everything to the next sweep.
  if (!c.subreaper || c.arriving > 0) return 0;
  int reaped = 0;
  for (pid_t pid : listed_children()) {
    if (c.owned.contains(pid)) continue;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) ++reaped;
  }
  return reaped;
}

std::vector<pid_t> unowned_children(pid_t group) {
  Children& c = children();
  std::lock_guard lock(c.mu);
  if (c.arriving > 0) return {};
  std::vector<pid_t> out;
  for (pid_t pid : listed_children()) {
    if (c.owned.contains(pid)) continue;
    const auto s = proc_stat(pid);
    if (s && s->state != 'Z' && (group < 0 || s->pgrp == group)) out.push_back(pid);
  }
  return out;
}

std::vector<pid_t> unowned_trees(pid_t group) {
  std::vector<pid_t> out;
  for (pid_t p : unowned_children(group)) {
    out.push_back(p);
    for (pid_t d : descendants(p)) out.push_back(d);
  }
  return out;
}

std::string find_on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    const std::string candidate = std::string(dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return "";
}

void signal_group(pid_t pgid, int sig) {
  if (pgid > 0 && ::kill(-pgid, sig) != 0 && errno != ESRCH) {
    throw_errno(__FILE__, __LINE__, fmt::format("kill(-{}, {})", pgid, sig));
  }
}

}  // namespace cprr

#pragma once
// How a local world's rank processes come to be: the seam between the two ways World starts one.
// A C++ worker is posix_spawn'ed per rank (DirectSpawner): it starts in milliseconds. A Python
// worker imports torch and the case files first, seconds per rank, so its ranks are forked from a
// template process that did that once (TemplateSpawner): imported and registered everything as a
// rank does, but ran no case, touched no GPU, joined no process group and started no thread. The
// child then becomes the rank: it starts its backend (CUDA, the communicator) itself.
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "recorder/launch/process.h"
#include "runtime/error.h"

namespace cprr {

/// Thrown when the stop descriptor fired while a rank or a world was starting; what it started is
/// already killed and reaped (a world's directory removed).
class Interrupted : public Error {
 public:
  using Error::Error;
};

/// Whether `stop_fd` (-1: never) is readable now: a stop descriptor (SpawnLimits::stop_fd,
/// WorldSpec::stop_fd) fired.
bool stop_requested(int stop_fd);

/// How long a start may take, and what ends it early (WorldSpec::stop_fd; -1: nothing).
struct SpawnLimits {
  std::chrono::steady_clock::time_point deadline;
  int stop_fd = -1;
};

/// Starts the process a SpawnSpec describes (its argv, descriptors, process group and its
/// environment on top of the controller's) as a child of this process, owned by the ChildProcess
/// returned, whichever way it is made. Safe to call from several threads (standby worlds start
/// on the controller's starter threads).
class RankSpawner {
 public:
  virtual ~RankSpawner() = default;
  /// Throws cprr::Error saying why the process cannot start; Interrupted when limits.stop_fd
  /// fired first.
  virtual ChildProcess start(const SpawnSpec& spec, const SpawnLimits& limits) = 0;
};

/// posix_spawn: the rank execs the worker itself.
class DirectSpawner : public RankSpawner {
 public:
  ChildProcess start(const SpawnSpec& spec, const SpawnLimits& limits) override;
};

/// What a template process runs: the worker with its own arguments (a Python worker's
/// `--cases FILE...`) and `--template FD`, in this environment on top of the controller's (the
/// ranks' own, less what differs per rank). Worlds whose ranks would differ in one of these need
/// a template of their own; the backend is no part of it (the template never starts one).
struct TemplateCommand {
  std::string worker;
  std::vector<std::string> worker_args;
  std::vector<std::pair<std::string, std::string>> env;
  auto operator<=>(const TemplateCommand&) const = default;
};

/// Forks ranks from a template process (python/cprr/rank/template.py), started with the first
/// rank it is asked for and kept for every later one; its requests and replies are
/// launch/fork_request.h's, one at a time. The template double-forks, so each rank is reparented
/// to this process, which becomes a child subreaper (become_subreaper) to take it: the rank is
/// then waited for and signalled exactly as a spawned one. A template that dies, answers with an
/// error or does not answer in time fails that start with its output's tail, and the next start
/// starts a new one. Destruction ends the template (its process group) and reaps it.
class TemplateSpawner : public RankSpawner {
 public:
  explicit TemplateSpawner(TemplateCommand command);
  ~TemplateSpawner() override;
  TemplateSpawner(const TemplateSpawner&) = delete;
  TemplateSpawner& operator=(const TemplateSpawner&) = delete;

  ChildProcess start(const SpawnSpec& spec, const SpawnLimits& limits) override;
  /// Starts the template now unless one runs, so that its imports overlap other work (a node
  /// agent starts it as it connects, before any world asks for a rank). A template that fails
  /// to start is reported by the next start(), which starts a new one.
  void prepare();
  /// The running template's pid; -1 when none runs (not started yet, or ended after a failure).
  pid_t template_pid();

 private:
  struct Template;  // the running template: its process, its socket, its output
  std::unique_ptr<Template> launch() const;
  /// The template's reply to the request just sent, waiting at most until `limits`.
  std::string await_reply(const SpawnLimits& limits);
  /// Throws why the start failed, quoting the template's output, after ending the template when
  /// `end` (it died or its state is unknown) so that the next start starts a new one.
  [[noreturn]] void fail(const std::string& why, bool end);

  const TemplateCommand command_;
  std::mutex mu_;  // one request at a time: the template serves them in order
  std::unique_ptr<Template> template_;
};

}  // namespace cprr

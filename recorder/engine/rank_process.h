#pragma once
// A rank process as its world sees it: how it ended, and how to signal it. A local rank is a
// child of the controller (waitpid); a launched rank runs on some host under its node agent
// (recorder/rank/agent.h), which reports its end and forwards signals over a TCP connection.
#include <sys/types.h>

#include <optional>
#include <string>

#include "data/execution.h"
#include "recorder/launch/process.h"
#include "recorder/protocol/protocol.h"
#include "runtime/fd.h"

namespace cprr {

class RankProcess {
 public:
  virtual ~RankProcess() = default;
  /// How it ended, once known (non-blocking).
  virtual const std::optional<ExitInfo>& poll() = 0;
  /// Waits at most `timeout_ms` (-1: forever) for its end; returns early when it is lost().
  virtual const std::optional<ExitInfo>& wait(int timeout_ms) = 0;
  /// Sends `sig` to it and to every process it started (its process group).
  virtual void signal(int sig) = 0;
  /// Lets go of an ended rank (a local one is reaped: its pid may be reused from then on, so
  /// signal() does nothing after this).
  virtual void reap() {}
  /// Why its end can never be known (the connection to its supervisor broke: its host, the
  /// launcher or the supervisor died); "" while it can.
  virtual std::string lost() const { return {}; }
  /// Its pid on this host while it is held (a local rank, unreaped); -1 for a launched one.
  virtual pid_t local_pid() const { return -1; }
  /// Its end is known, or it is lost: nothing more will come of it.
  bool gone() { return poll().has_value() || !lost().empty(); }
};

/// A rank spawned by the controller. Every rank of a local world is in rank 0's process group,
/// so signal() reaches the whole world, as the group signal always did; but only while this rank
/// is unreaped: its membership then keeps the group's id from being reused (ChildProcess::held).
class LocalRank : public RankProcess {
 public:
  LocalRank(ChildProcess child, pid_t group) : child_(std::move(child)), group_(group) {}
  const std::optional<ExitInfo>& poll() override { return child_.poll(); }
  const std::optional<ExitInfo>& wait(int timeout_ms) override { return child_.wait(timeout_ms); }
  void signal(int sig) override {
    if (child_.held()) signal_group(group_, sig);
  }
  void reap() override { child_.reap(); }
  pid_t local_pid() const override { return child_.held() ? child_.pid() : -1; }

 private:
  ChildProcess child_;
  pid_t group_;
};

/// A rank started by a node agent, known through the connection the agent supervises it on.
class RemoteRank : public RankProcess {
 public:
  /// `supervisor`: the authenticated supervisor channel; `where`: its agent, for messages.
  RemoteRank(UniqueFd supervisor, std::string where);
  const std::optional<ExitInfo>& poll() override;
  const std::optional<ExitInfo>& wait(int timeout_ms) override;
  void signal(int sig) override;
  std::string lost() const override { return lost_; }

 private:
  /// Reads what the supervisor sent, waiting at most `timeout_ms`.
  void pump(int timeout_ms);

  UniqueFd fd_;
  FrameReader reader_;
  std::string where_;
  std::optional<ExitInfo> exit_;
  std::string lost_;
};

}  // namespace cprr

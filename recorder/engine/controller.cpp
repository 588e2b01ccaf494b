#include "recorder/engine/controller.h"

#include <algorithm>
#include <cmath>

#include "analysis/hang_diagnosis.h"
#include "runtime/error.h"

namespace cprr {
namespace {

// The stop descriptor ended (or prevented) the execution: an `error` the caller recognises.
void interrupt(ExecutionResult& res, const std::string& why) {
  res.status = ExecStatus::error;
  res.interrupted = true;
  res.summary = why;
}

}  // namespace

Controller::Controller(ControllerConfig config) : config_(std::move(config)) {}

Controller::~Controller() { close_pools(); }

void Controller::close_pools() { pools_.clear(); }

std::string timeout_problem(double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0) return "must be a positive number of seconds";
  if (seconds > kMaxTimeoutS) {
    return fmt::format("must be at most {} seconds (seven days)", kMaxTimeoutS);
  }
  return {};
}

std::chrono::milliseconds Controller::deadline_for(const CaseInstance& inst) const {
  double s = config_.default_timeout_s;
  if (config_.timeout_override_s) {
    s = *config_.timeout_override_s;
  } else if (inst.info.options.timeout_s > 0) {
    s = inst.info.options.timeout_s;
  }
  // Saturate rather than overflow: a case declaring an absurd timeout_s waits the maximum.
  if (!(s > 0)) s = config_.default_timeout_s;
  s = std::min(s, kMaxTimeoutS);
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

World& Controller::world_for(const CaseInstance& inst, Mode mode, std::unique_ptr<World>& fresh,
                             ExecutionResult& res) {
  WorldConfig wc{config_.worker,         config_.backend, inst.world_size, config_.startup_timeout,
                 config_.log_tail_bytes, config_.env,     config_.stop_fd};
  std::unique_ptr<World>* slot = &fresh;
  if (mode == Mode::pool) {
    slot = &pools_[inst.world_size];
    if (*slot && (*slot)->reusable()) {
      if (auto why = (*slot)->idle_fault()) {
        res.note = fmt::format("pooled world {} replaced before this case: {}", (*slot)->id(), *why);
      }
    }
    if (*slot && !(*slot)->reusable()) slot->reset();
  }
  if (!*slot) {
    *slot = std::make_unique<World>(wc, next_world_++);
    res.startup_ms = (*slot)->startup_ms();
  }
  return **slot;
}

ExecutionResult Controller::run(const CaseInstance& inst, Mode mode, Placement placement) {
  const auto t0 = Clock::now();
  ExecutionResult res;
  res.started_at = std::chrono::system_clock::now();
  res.id = next_execution_++;
  res.case_id = inst.id;
  res.label = inst.label();
  res.mode = mode;
  if (stop_requested(config_.stop_fd)) {
    interrupt(res, "interrupted before it started");
    return res;
  }
  std::unique_ptr<World> fresh;
  try {
    World& world = world_for(inst, mode, fresh, res);
    res.world_id = world.id();
    res.pool_position = ++served_[world.id()];
    world.start(RunCase{res.id, inst.info.name, inst.params, inst.seed, placement});
    res.ranks = world.collect(res.id, Clock::now() + deadline_for(inst), config_.after_death);
    classify(res, world);
    if (mode == Mode::pool && !world.reusable()) pools_.erase(inst.world_size);
  } catch (const Interrupted& e) {
    interrupt(res, e.what());
    if (mode == Mode::pool) pools_.erase(inst.world_size);
  } catch (const std::exception& e) {
    res.status = ExecStatus::error;
    res.summary = e.what();
    if (mode == Mode::pool) pools_.erase(inst.world_size);
  }
  fresh.reset();  // a fresh world's shutdown is part of its cost
  res.as_expected = meets(res.status, inst.info.options.expect);
  res.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return res;
}

void Controller::classify(ExecutionResult& res, World& world) {
  std::vector<RankReport>& ranks = res.ranks;
  int died = -1, broken = -1, silent = -1, failed = -1, errored = -1;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const RankReport& rep = ranks[r];
    if (rep.exit && !rep.done && died < 0) died = r;
    if (!rep.protocol_error.empty() && broken < 0) broken = r;
    if (!rep.done && !rep.exit && rep.protocol_error.empty() && silent < 0) silent = r;
    if (rep.done && rep.done->outcome == RankOutcome::fail && failed < 0) failed = r;
    if (rep.done && rep.done->outcome == RankOutcome::error && errored < 0) errored = r;
  }
  if (died >= 0) {
    res.status = ExecStatus::crash;
    res.summary = fmt::format("rank {} {}", died, ranks[died].exit->describe());
  } else if (broken >= 0) {
    // The rank's own channel broke mid-case (case code wrote to it or closed it, or the rank sent
    // something that is no answer to this execution): that rank failed this case, like a crash.
    res.status = ExecStatus::crash;
    res.summary = fmt::format("rank {}: protocol error: {}", broken, ranks[broken].protocol_error);
  } else if (silent >= 0 && world.stop_requested()) {
    interrupt(res, fmt::format("interrupted while rank {} was still running the case", silent));
  } else if (silent >= 0) {
    res.status = ExecStatus::hang;
    world.query_status(res.id, ranks, config_.status_grace);
    res.summary = diagnose_hang(ranks);
  } else if (errored >= 0) {
    res.status = ExecStatus::error;
    res.summary = fmt::format("rank {}: {}", errored, ranks[errored].done->error);
  } else if (failed >= 0) {
    res.status = ExecStatus::fail;
    res.summary = fmt::format("rank {}: {}", failed, ranks[failed].done->error);
  } else {
    res.status = ExecStatus::pass;
  }
  if (res.status == ExecStatus::crash || res.status == ExecStatus::hang ||
      res.status == ExecStatus::error) {
    // Crash, hang, interruption, or a rank's harness reporting an error: the world is not trusted.
    world.kill(config_.kill_grace);
  }
  world.fill_tails(ranks);
}

}  // namespace cprr

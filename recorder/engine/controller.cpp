#include "recorder/engine/controller.h"

#include <algorithm>
#include <cmath>

#include "analysis/classify.h"
#include "analysis/hang_diagnosis.h"
#include "analysis/layout_check.h"
#include "recorder/engine/world.h"
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

Controller::Controller(ControllerConfig config)
    : Controller(std::move(config), std::make_unique<ProcessWorlds>()) {}

Controller::Controller(ControllerConfig config, std::unique_ptr<WorldFactory> worlds)
    : config_(std::move(config)), worlds_(std::move(worlds)) {}

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

WorldHandle& Controller::world_for(const CaseInstance& inst, Mode mode,
                                   std::unique_ptr<WorldHandle>& fresh, ExecutionResult& res) {
  WorldConfig wc{config_.worker,         config_.backend, inst.world_size, config_.startup_timeout,
                 config_.log_tail_bytes, config_.env,     config_.stop_fd, config_.launch};
  std::unique_ptr<WorldHandle>* slot = &fresh;
  if (mode == Mode::pool) {
    slot = &pools_[inst.world_size];
    if (*slot && (*slot)->reusable()) {
      if (auto why = (*slot)->idle_fault()) {
        res.note =
            fmt::format("pooled world {} replaced before this case: {}", (*slot)->id(), *why);
      }
    }
    if (*slot && !(*slot)->reusable()) slot->reset();
  }
  if (!*slot) {
    *slot = worlds_->make(wc, next_world_++);
    res.startup_ms = (*slot)->startup_ms();
  }
  return **slot;
}

ExecutionResult Controller::run(const CaseInstance& inst, Mode mode, Placement placement,
                                const Perturbation& perturbation) {
  const auto t0 = config_.now();
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
  std::unique_ptr<WorldHandle> fresh;
  try {
    WorldHandle& world = world_for(inst, mode, fresh, res);
    res.world_id = world.id();
    res.symmetric_pool = world.symmetric_pool();
    res.pool_position = ++served_[world.id()];
    world.start(RunCase{res.id, inst.info.name, inst.params, inst.seed, placement, perturbation,
                        config_.timeline});
    res.ranks = world.collect(res.id, config_.now() + deadline_for(inst), config_.after_death);
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
  res.wall_ms = std::chrono::duration<double, std::milli>(config_.now() - t0).count();
  return res;
}

void Controller::classify(ExecutionResult& res, WorldHandle& world) {
  const Classification c = cprr::classify(res.ranks, world.stop_requested());
  res.status = c.status;
  res.summary = c.summary;
  res.interrupted = c.interrupted;
  if (c.needs_status_query) {
    // The watchdogs' answers are what diagnose_hang lines up; ask before the ranks are killed.
    world.query_status(res.id, res.ranks, config_.status_grace);
    res.summary = diagnose_hang(res.ranks);
  }
  if (res.status == ExecStatus::crash || res.status == ExecStatus::hang) {
    // What the ranks without a result had called; a disagreement there is the likely cause of
    // the crash or hang: say so where the status is read (the verdict names it too).
    world.read_flight_records(res.id, res.ranks);
    if (const auto m = check_collectives(res)) {
      res.summary += "; the ranks called a collective differently: " + m->describe();
    }
  }
  if (c.kill_world) world.kill(config_.kill_grace);
  world.fill_tails(res.ranks);
}

}  // namespace cprr

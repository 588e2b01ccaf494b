#include "recorder/rank/case_runner.h"

#include <chrono>
#include <exception>
#include <string>

namespace cprr {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

const char* phase_name(int p) {
  static constexpr const char* kNames[] = {"idle", "reset", "body", "drain", "capture"};
  return p >= 0 && p < 5 ? kNames[p] : "?";
}

std::string what_was_thrown(const std::exception_ptr& thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "the case threw something that is no std::exception (so it has no message)";
  }
}

}  // namespace

CaseRunner::CaseRunner(RankState& state, const Registry& registry, EnvironmentSnapshot env)
    : state_(state), registry_(registry), env_(std::move(env)) {}

void CaseRunner::set_phase(Phase p, uint64_t execution) {
  execution_.store(execution, std::memory_order_relaxed);
  phase_.store(static_cast<int>(p), std::memory_order_release);
}

void CaseRunner::reset(const RunCase& msg) {
  // What a fresh process would give the case: its own environment, collective numbering from 0,
  // user hooks run. Allocator contents, streams and user globals are deliberately kept: those are
  // what the fresh-vs-pooled differential looks for.
  env_.restore();
  state_.backend->prepare_arenas();
  state_.backend->close_ended_groups();
  state_.backend->reset_collective_progress();
  state_.foreign->reset();
  for (Hook hook : registry_.reset_hooks()) hook();
}

CaseDone CaseRunner::run(const RunCase& msg) {
  CaseDone done;
  done.execution = msg.execution;
  const RegisteredCase* c = registry_.find(msg.name);
  if (c == nullptr) {
    done.outcome = RankOutcome::error;
    done.error = fmt::format("this worker has no case named '{}'", msg.name);
    return done;
  }
  auto t0 = Clock::now();
  set_phase(Phase::reset, msg.execution);
  try {
    reset(msg);
  } catch (const std::exception& e) {
    done.outcome = RankOutcome::error;
    done.error = fmt::format("reset failed: {}", e.what());
    set_phase(Phase::idle, 0);
    return done;
  }
  done.reset_ms = ms_since(t0);
  Context ctx(state_, msg.name, msg.params, msg.seed, msg.placement, msg.execution,
              msg.perturbation, msg.timeline);
  auto t1 = Clock::now();
  try {
    set_phase(Phase::body, msg.execution);
    c->body(ctx);
    set_phase(Phase::drain, msg.execution);
    ctx.drain();
  } catch (const CaseSkipped& e) {
    done.outcome = RankOutcome::skip;
    done.error = e.what();
    try {
      ctx.drain();  // what it queued before skipping must not outlive the case's buffers
    } catch (...) {
    }
  } catch (...) {
    // Any throw, std::exception or not: a throw the rank let escape would end it as a crash.
    done.outcome = RankOutcome::fail;
    done.error = what_was_thrown(std::current_exception());
    try {
      ctx.drain();  // ops still queued must not outlive the case's buffers
    } catch (...) {
    }
  }
  if (const std::string why = state_.backend->broken(); !why.empty()) {
    done.outcome = RankOutcome::error;
    done.error =
        fmt::format("{}{}the rank's device state is unusable, so its world is replaced: {}",
                    done.error, done.error.empty() ? "" : "; ", why);
  }
  done.body_ms = ms_since(t1);
  set_phase(Phase::capture, msg.execution);
  done.capture = ctx.finish(done.outcome == RankOutcome::ok);
  set_phase(Phase::idle, 0);
  return done;
}

WatchdogStatus CaseRunner::status() const {
  WatchdogStatus s;
  s.phase = phase_name(phase_.load(std::memory_order_acquire));
  s.execution = execution_.load(std::memory_order_relaxed);
  // A case that calls its library's collectives (a Python case's torch.distributed) reports those.
  const CollectiveProgress p =
      state_.foreign->get().value_or(state_.backend->collective_progress());
  s.entered_seq = p.entered_seq;
  s.entered_kind = p.entered_kind;
  s.completed_seq = p.completed_seq;
  s.completed_kind = p.completed_kind;
  s.running = state_.backend->running_ops();
  return s;
}

}  // namespace cprr

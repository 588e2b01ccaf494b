#include "recorder/engine/controller.h"

#include <algorithm>
#include <cmath>

#include "analysis/classify.h"
#include "analysis/hang_diagnosis.h"
#include "analysis/layout_check.h"
#include "recorder/engine/job_slots.h"
#include "recorder/engine/world.h"
#include "recorder/engine/world_startup.h"
#include "recorder/launch/proc_tree.h"
#include "runtime/error.h"

namespace cprr {
namespace {

// The stop descriptor ended (or prevented) the execution: an `error` the caller recognises.
void interrupt(ExecutionResult& res, const std::string& why) {
  res.status = ExecStatus::error;
  res.interrupted = true;
  res.summary = why;
}

// Appends `more` (when there is any) to the execution's note, clauses separated by "; ".
void add_note(ExecutionResult& res, const std::string& more) {
  if (!more.empty()) res.note += (res.note.empty() ? "" : "; ") + more;
}

}  // namespace

WorldStarters::~WorldStarters() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::future<std::unique_ptr<WorldHandle>> WorldStarters::submit(Start start, int threads) {
  std::packaged_task<std::unique_ptr<WorldHandle>()> task(std::move(start));
  auto future = task.get_future();
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(task));
    if (static_cast<int>(threads_.size()) < threads) threads_.emplace_back([this] { loop(); });
  }
  cv_.notify_one();
  return future;
}

void WorldStarters::loop() {
  for (;;) {
    std::packaged_task<std::unique_ptr<WorldHandle>()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left to start
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // a failed start is kept in the future, as its case's error
  }
}

WorldRetirer::~WorldRetirer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WorldRetirer::retire(std::unique_ptr<WorldHandle> world) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return waiting_ == nullptr; });
  waiting_ = std::move(world);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  cv_.notify_all();
}

void WorldRetirer::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return waiting_ == nullptr && !busy_; });
}

void WorldRetirer::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || waiting_ != nullptr; });
    if (waiting_ == nullptr) return;  // stopping, nothing left to shut down
    std::unique_ptr<WorldHandle> world = std::move(waiting_);
    busy_ = true;
    cv_.notify_all();  // room for the next one
    lock.unlock();
    world.reset();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

Controller::Controller(ControllerConfig config)
    : Controller(std::move(config), std::make_unique<ProcessWorlds>()) {}

Controller::Controller(ControllerConfig config, std::unique_ptr<WorldFactory> worlds)
    : config_(std::move(config)),
      worlds_(std::move(worlds)),
      next_world_(config_.first_id),
      next_execution_(config_.first_id) {
  if (config_.master_port > 0)
    set_env(config_.env, "CPRR_MASTER_PORT", std::to_string(config_.master_port));
}

uint64_t Controller::take_id(uint64_t& next) const {
  const uint64_t id = next;
  next += config_.id_step;
  return id;
}

Controller::~Controller() {
  close_pools();
  end_strays();
}

void Controller::end_strays() {
  // Every world is gone: what its ranks left that escaped their world's sweep (a process that
  // left the world's process group, e.g. a daemon that called setsid) was reparented here.
  const std::vector<pid_t> strays = unowned_trees();
  if (strays.empty()) return;
  fmt::print(stderr, "cprr: {} process{} the ranks left running, killed at exit: {}\n",
             strays.size(), strays.size() == 1 ? "" : "es", kill_and_name(strays));
  reap_orphans();
}

void Controller::close_pools() {
  pools_.clear();
  standby_.clear();  // waits for starts still running, then shuts those worlds down
  retirer_.drain();
}

WorldConfig Controller::world_config(int world_size) const {
  return WorldConfig{{static_cast<const WorldSpec&>(config_)}, world_size};
}

void Controller::foresee(const std::vector<int>& fresh_world_sizes, bool next_is_fresh) {
  // The next run's own world counts besides the standby ones: matched by size alone, it would
  // otherwise be taken from those meant for later cases, leaving one fewer starting ahead.
  const int ahead = config_.run.standby > 0 ? config_.run.standby + (next_is_fresh ? 1 : 0) : 0;
  const std::size_t wanted = std::min<std::size_t>(ahead, fresh_world_sizes.size());
  std::deque<Standby> kept;
  for (std::size_t k = 0; k < wanted; ++k) {
    const int size = fresh_world_sizes[k];
    auto it = std::find_if(standby_.begin(), standby_.end(),
                           [&](const Standby& s) { return s.world_size == size; });
    if (it != standby_.end()) {
      kept.push_back(std::move(*it));
      standby_.erase(it);
      continue;
    }
    const uint64_t id = take_id(next_world_);
    WorldFactory* factory = worlds_.get();
    auto start = [factory, id, wc = world_config(size)] { return factory->make(wc, id); };
    kept.push_back(Standby{size, config_.standby_policy == std::launch::deferred
                                     ? std::async(std::launch::deferred, start)
                                     : starters_.submit(start, config_.run.standby)});
  }
  standby_ = std::move(kept);  // the ones no longer needed are shut down here
}

std::unique_ptr<WorldHandle> Controller::take_standby(int world_size) {
  auto it = std::find_if(standby_.begin(), standby_.end(),
                         [&](const Standby& s) { return s.world_size == world_size; });
  if (it == standby_.end()) return nullptr;
  std::future<std::unique_ptr<WorldHandle>> world = std::move(it->world);
  standby_.erase(it);
  return world.get();  // a start that failed throws here, as a start made now would
}

std::string timeout_problem(double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0) return "must be a positive number of seconds";
  if (seconds > kMaxTimeoutS) {
    return fmt::format("must be at most {} seconds (seven days)", kMaxTimeoutS);
  }
  return {};
}

std::chrono::milliseconds Controller::deadline_for(const CaseInstance& inst) const {
  double s = config_.default_timeout_s;
  if (config_.run.timeout_override_s) {
    s = *config_.run.timeout_override_s;
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
    if (mode == Mode::fresh) *slot = take_standby(inst.world_size);
    if (!*slot) *slot = worlds_->make(world_config(inst.world_size), take_id(next_world_));
    // A standby world's start overlapped earlier cases: wall_ms holds only what was left of it.
    res.startup_ms = (*slot)->startup_ms();
    res.startup_phases = (*slot)->startup_phases();
  }
  return **slot;
}

namespace {

// A case whose rank's node agent died (or whose node dropped) under it has no verdict of its own:
// a rank without a report is the infrastructure's doing, so the case is an error naming the host.
// One whose ranks all reported finished before that, and keeps its verdict.
void blame_infrastructure(ExecutionResult& res, WorldHandle& world) {
  const bool all_reported = std::all_of(res.ranks.begin(), res.ranks.end(),
                                        [](const RankReport& r) { return r.done.has_value(); });
  if (all_reported) return;
  const std::string why = world.infrastructure_fault();
  if (why.empty()) return;
  res.status = ExecStatus::error;
  res.summary =
      fmt::format("infrastructure: {}; the case has no verdict (its ranks: {})", why, res.summary);
}

}  // namespace

ExecutionResult Controller::run(const CaseInstance& inst, Mode mode, Placement placement,
                                const Perturbation& perturbation) {
  const auto t0 = config_.now();
  ExecutionResult res;
  res.started_at = std::chrono::system_clock::now();
  res.id = take_id(next_execution_);
  res.devices = config_.devices;
  res.master_port = config_.master_port;
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
    res.collectives = transport_name(world.transport());
    res.rank_gpus = world.rank_gpus();
    res.pool_position = ++served_[world.id()];
    world.start(RunCase{res.id, inst.info.name, inst.params, inst.seed, placement, perturbation,
                        config_.timeline});
    res.ranks = world.collect(res.id, config_.now() + deadline_for(inst), config_.after_death);
    res.symmetric_pool = pool_after_case(res.ranks, res.symmetric_pool);
    res.first_use_phases = first_use_phases(res.ranks);
    add_note(res, world.stopped_early());
    classify(res, world);
    blame_infrastructure(res, world);
    if (mode == Mode::pool && !world.reusable()) pools_.erase(inst.world_size);
  } catch (const Interrupted& e) {
    interrupt(res, e.what());
    if (mode == Mode::pool) pools_.erase(inst.world_size);
  } catch (const NoNodeLeft& e) {
    res.status = ExecStatus::error;
    res.summary = e.what();
    cannot_go_on_ = e.what();
    if (mode == Mode::pool) pools_.erase(inst.world_size);
  } catch (const std::exception& e) {
    res.status = ExecStatus::error;
    res.summary = e.what();
    if (mode == Mode::pool) pools_.erase(inst.world_size);
  }
  // A healthy fresh world's shutdown overlaps the next case; one that was interrupted, killed
  // or broken is ended here, so nothing of it outlives a stop.
  if (fresh && config_.retire_in_background && fresh->reusable() && !fresh->stop_requested()) {
    retirer_.retire(std::move(fresh));
  }
  fresh.reset();
  res.as_expected = meets(res.status, inst.info.options.expect);
  res.wall_ms = std::chrono::duration<double, std::milli>(config_.now() - t0).count();
  return res;
}

void Controller::classify(ExecutionResult& res, WorldHandle& world) {
  const Classification c = cprr::classify(res.ranks, world.stop_requested());
  res.status = c.status;
  res.summary = c.summary;
  res.interrupted = c.interrupted;
  add_note(res, c.note);
  if (c.needs_status_query) {
    // The watchdogs' answers are what diagnose_hang lines up; ask before the ranks are killed.
    world.query_status(res.id, res.ranks, config_.status_grace);
    world.read_flight_records(res.id, res.ranks);  // where each rank is, per group and channel
    res.summary = diagnose_hang(res.ranks);
  }
  if (c.released_by >= 0) {
    world.query_status(res.id, res.ranks, config_.status_grace);
    // The records too: a rank's watchdog counts a call once it started, its record before, and
    // the call a released rank waits in is the one its record names (collect() stopped on it).
    world.read_flight_records(res.id, res.ranks);
    // A rank may have answered since collect() stopped: then it is not described as released.
    add_note(res, describe_released(res.ranks, c.released_by));
  }
  bool kill = c.kill_world;
  if (res.status == ExecStatus::crash || res.status == ExecStatus::hang || c.released_by >= 0) {
    // What the ranks without a result had called; a disagreement there is the likely cause of
    // the crash or hang (or of a rank's failure: gloo raising on a size it was not sent): say
    // so where the status is read (the verdict names it too).
    if (!c.needs_status_query && c.released_by < 0) {
      world.read_flight_records(res.id, res.ranks);  // read above if so
    }
    if (const auto m = check_collectives(res)) {
      res.summary += "; the ranks called a collective differently: " + m->describe();
    }
  } else if (const auto m = check_collectives(res); m && m->field != "dtype" && m->field != "op") {
    // Calls that moved other amounts of bytes (a message received short, another split or
    // root) completed anyway: the transport may still hold what one side left (NCCL's
    // point-to-point channels do), and the world's next case would read it.
    add_note(res, fmt::format("the ranks called a collective differently ({}): the world is "
                              "replaced, as its transport may hold what one side left",
                              m->describe()));
    kill = true;
  }
  for (std::size_t r = 0; r < res.ranks.size(); ++r) {
    const std::optional<RankResult>& done = res.ranks[r].done;
    if (!done || done->distrusted.empty()) continue;
    // A pooled world's next case would meet what this one left (a transport it broke, a
    // library's state), and fail for it. The reason says which.
    add_note(res, fmt::format("rank {}: {}: the world is replaced", r, done->distrusted));
    kill = true;
    break;
  }
  add_note(res, world.end_leftovers(fmt::format("case {} ({})", res.case_id, res.label)));
  if (kill) world.kill(config_.kill_grace);
  world.fill_tails(res.ranks);
}

}  // namespace cprr

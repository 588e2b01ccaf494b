#pragma once
// A scripted stand-in for the engine's worlds (ninja's FakeCommandRunner is the model): FakeWorlds
// makes FakeWorld handles that answer collect() from a script and write down every call, so the
// controller's logic is tested without spawning a process.
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "recorder/engine/world_handle.h"
#include "tests/analysis/rank_reports.h"

namespace cprr::fake_world {

/// What successive collect() calls return: the reports for (execution id, world size).
using Collected = std::function<std::vector<RankReport>(uint64_t execution, int size)>;

/// Every rank reports `rep`, with the execution id filled in where it reported a result.
inline Collected every_rank(const RankReport& rep) {
  return [rep](uint64_t execution, int size) {
    std::vector<RankReport> out(size, rep);
    for (RankReport& r : out) {
      if (r.done) r.done->execution = execution;
    }
    return out;
  };
}

/// Rank 0 reports `rep`, the others pass.
inline Collected rank0(const RankReport& rep) {
  return [rep](uint64_t execution, int size) {
    std::vector<RankReport> out = every_rank(rank_reports::passed())(execution, size);
    out[0] = rep;
    return out;
  };
}

/// The script the fakes follow and the record of what the controller asked of them, shared by
/// the test, the factory and every world it made (they outlive one another in any order).
struct Script {
  std::deque<Collected> collects;            ///< consumed in order; when empty, every rank passes
  std::optional<std::string> idle_fault;     ///< what the next idle_fault() reports, once
  std::optional<std::string> start_failure;  ///< make() throws cprr::Error with it, once
  bool interrupt_start = false;              ///< make() throws Interrupted, once
  bool stop = false;                         ///< what every world's stop_requested() says
  std::map<int, WatchdogStatus> watchdogs;   ///< query_status() answers for these ranks only
  /// read_flight_records() answers for these ranks only (when they have no result).
  std::map<int, std::vector<CollectiveRecord>> flight_records;
  double startup_ms = 5;
  std::string symmetric_pool = "fake window";
  CollectiveTransport transport = CollectiveTransport::gloo;
  std::string rank_gpus;
  /// When valid, a world's destructor waits for it (10 s at most) before it notes "destroy": a
  /// test holds a world's shutdown to see who waits for it.
  std::shared_future<void> destroy_gate;

  std::vector<WorldConfig> made;             ///< make()'s configs, failed ones included
  std::vector<std::string> calls;            ///< "<call> <world id>", in order
  std::vector<RunCase> started;              ///< start()'s messages
  std::vector<uint64_t> collected;           ///< collect()'s execution ids
  std::vector<Clock::time_point> deadlines;  ///< collect()'s deadlines

  /// Guards `calls`: worlds may be destroyed on the controller's retiring thread.
  mutable std::mutex mu;

  /// How many times `call` ("kill 1") was made.
  long count(const std::string& call) const {
    std::lock_guard lock(mu);
    return std::ranges::count(calls, call);
  }
  void note(std::string call) {
    std::lock_guard lock(mu);
    calls.push_back(std::move(call));
  }
};

/// One scripted world: reusable until kill() or until collect() returns a death or broken channel.
class FakeWorld : public WorldHandle {
 public:
  FakeWorld(std::shared_ptr<Script> script, int size, uint64_t id)
      : script_(std::move(script)), size_(size), id_(id) {}
  ~FakeWorld() override {
    if (script_->destroy_gate.valid()) script_->destroy_gate.wait_for(std::chrono::seconds(10));
    note("destroy");
  }

  uint64_t id() const override { return id_; }
  bool reusable() const override { return reusable_; }
  std::optional<std::string> idle_fault() override {
    auto fault = std::exchange(script_->idle_fault, std::nullopt);
    if (fault) reusable_ = false;
    return fault;
  }
  bool stop_requested() const override { return script_->stop; }
  double startup_ms() const override { return script_->startup_ms; }
  const std::string& symmetric_pool() const override { return script_->symmetric_pool; }
  CollectiveTransport transport() const override { return script_->transport; }
  const std::string& rank_gpus() const override { return script_->rank_gpus; }

  void start(const RunCase& msg) override {
    note("start");
    script_->started.push_back(msg);
  }
  std::vector<RankReport> collect(uint64_t execution, Clock::time_point deadline,
                                  std::chrono::milliseconds) override {
    note("collect");
    script_->collected.push_back(execution);
    script_->deadlines.push_back(deadline);
    Collected next = every_rank(rank_reports::passed());
    if (!script_->collects.empty()) {
      next = std::move(script_->collects.front());
      script_->collects.pop_front();
    }
    std::vector<RankReport> reports = next(execution, size_);
    for (const RankReport& r : reports) {
      if (r.exit || !r.protocol_error.empty()) reusable_ = false;  // as World's on_eof and pump
    }
    return reports;
  }
  void query_status(uint64_t, std::vector<RankReport>& reports,
                    std::chrono::milliseconds) override {
    note("query");
    for (const auto& [rank, answer] : script_->watchdogs) {
      if (!reports.at(rank).done) reports.at(rank).watchdog = answer;
    }
  }
  void read_flight_records(uint64_t, std::vector<RankReport>& reports) override {
    note("flight");
    for (const auto& [rank, entered] : script_->flight_records) {
      if (!reports.at(rank).done) reports.at(rank).entered = entered;
    }
  }
  void kill(std::chrono::milliseconds) override {
    note("kill");
    reusable_ = false;
  }
  void fill_tails(std::vector<RankReport>& reports) override {
    note("tails");
    for (std::size_t r = 0; r < reports.size(); ++r) {
      reports[r].stderr_tail = fmt::format("world {} rank {}", id_, r);
    }
  }

 private:
  void note(const std::string& call) { script_->note(fmt::format("{} {}", call, id_)); }

  std::shared_ptr<Script> script_;
  int size_;
  uint64_t id_;
  bool reusable_ = true;
};

/// The factory a Controller under test gets: FakeWorlds following `script`.
class FakeWorlds : public WorldFactory {
 public:
  explicit FakeWorlds(std::shared_ptr<Script> script) : script_(std::move(script)) {}

  std::unique_ptr<WorldHandle> make(const WorldConfig& config, uint64_t id) override {
    script_->made.push_back(config);
    if (auto why = std::exchange(script_->start_failure, std::nullopt)) throw Error(*why);
    if (std::exchange(script_->interrupt_start, false)) {
      throw Interrupted(fmt::format("interrupted while world {} was starting", id));
    }
    script_->note(fmt::format("make {}", id));
    return std::make_unique<FakeWorld>(script_, config.world_size, id);
  }

 private:
  std::shared_ptr<Script> script_;
};

}  // namespace cprr::fake_world

#include "commands/record_run.h"

#include <chrono>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>

#include "analysis/judgement.h"
#include "recorder/engine/plan.h"
#include "runtime/error.h"
#include "schema/record_queue.h"

namespace cprr {
namespace {

// --fail-fast: case `i`'s executions so far (every mode of this repeat ran), judged as the end of
// the run will judge them; why they end the run, or nullopt.
template <class Results, class Get>
std::optional<std::string> fail_fast_reason(const RecordPlan& p, std::size_t i,
                                            const Results& results, Get get) {
  std::vector<const ExecutionResult*> mine;
  for (const auto& item : results) {
    const ExecutionResult& e = get(item);
    if (e.case_id == p.cases[i].id) mine.push_back(&e);
  }
  if (judge_case(p.cases[i], p.case_ids[i], mine).as_expected) return std::nullopt;
  return fmt::format("--fail-fast: case {} ({}) was not as expected", p.case_ids[i],
                     p.cases[i].label());
}

// The order in which repeat `rep` runs the cases: the plan's, or one drawn from --shuffle's seed.
std::vector<std::size_t> run_order(const RecordPlan& p, int rep) {
  if (p.shuffle_seed) return shuffled_order(p.cases.size(), *p.shuffle_seed, rep);
  std::vector<std::size_t> order(p.cases.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  return order;
}

// One execution of the plan: case `i` (an index into RecordPlan::cases) in `mode`, in repeat `rep`.
struct Step {
  int rep = 0;
  std::size_t i = 0;
  Mode mode = Mode::fresh;
};

// Every execution of the plan in the order run_plan() runs them.
std::vector<Step> steps_of(const RecordPlan& p) {
  std::vector<Step> steps;
  for (int rep = 0; rep < p.repeat; ++rep) {
    for (std::size_t i : run_order(p, rep)) {
      for (Mode mode : p.modes) steps.push_back(Step{rep, i, mode});
    }
  }
  return steps;
}

// --standby: the world sizes of the fresh executions from step `s` on (its own first when it
// is fresh), as many as Controller::foresee keeps: `n` besides step s's own.
std::vector<int> fresh_sizes_from(const RecordPlan& p, const std::vector<Step>& steps,
                                  std::size_t s, int n) {
  std::vector<int> sizes;
  const std::size_t most = static_cast<std::size_t>(n) + (steps[s].mode == Mode::fresh ? 1 : 0);
  for (std::size_t k = s; k < steps.size() && sizes.size() < most; ++k) {
    if (steps[k].mode == Mode::fresh) sizes.push_back(p.cases[steps[k].i].world_size);
  }
  return sizes;
}

// Shown from several job threads at once (--jobs): every call holds the report's lock.
class ProgressReport {
 public:
  ProgressReport(ProgressStyle style, std::ostream& err, std::size_t total)
      : style_(style), err_(err), total_(total) {}

  void starting(std::size_t done, Mode mode, const CaseInstance& inst) {
    std::lock_guard lock(mu_);
    if (style_ != ProgressStyle::tty) return;
    const double elapsed = seconds_since_start();
    const std::string eta =
        done == 0 ? "?" : fmt::format("{:.0f} s", elapsed / done * (total_ - done));
    err_ << fmt::format("\r\033[K[{}/{}] {:.0f} s, ETA {}, {} unexpected; {} {}", done + 1, total_,
                        elapsed, eta, unexpected_, mode_name(mode), inst.label())
         << std::flush;
  }

  void finished(std::size_t done, const ExecutionResult& r, const CaseInstance& inst) {
    std::lock_guard lock(mu_);
    // Seeded bugs may fail or diverge by design; their judgement comes at the end.
    if (!r.as_expected && inst.info.options.seeded_bug.empty()) ++unexpected_;
    if (style_ != ProgressStyle::lines) return;
    err_ << fmt::format("[{}/{}] {:<5} {:<5} {} {:.1f} ms{}\n", done, total_, status_name(r.status),
                        mode_name(r.mode), r.label, r.wall_ms,
                        r.as_expected ? "" : " (not the expected status)")
         << std::flush;
  }

  ~ProgressReport() {
    if (style_ == ProgressStyle::tty) err_ << "\r\033[K" << std::flush;
  }

 private:
  double seconds_since_start() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

  std::mutex mu_;
  ProgressStyle style_;
  std::ostream& err_;
  std::size_t total_;
  std::size_t unexpected_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace

// Runs the plan in order (repeat, case, mode), handing each execution to the store as it
// completes and showing progress as `style` says; returns once every result is committed (a
// RecordQueue commits them on its own thread, so the next case starts at once). Stops at an
// interruption: the interrupted execution says nothing about its case, so it is neither recorded
// nor returned.
PlanRun run_plan(const RecordPlan& p, Controller& controller, RecordWriter& writer,
                 ProgressStyle style, std::ostream& err) {
  PlanRun out;
  // Results stay put while the queue reads them (a deque never moves its elements).
  std::deque<ExecutionResult> results;
  const std::size_t total = p.cases.size() * p.modes.size() * static_cast<std::size_t>(p.repeat);
  {
    RecordQueue store(writer);  // destroyed before `results`, writing what is still queued
    ProgressReport progress(style, err, total);
    const std::vector<Step> steps = steps_of(p);
    for (std::size_t s = 0; s < steps.size(); ++s) {
      const Step& step = steps[s];
      if (const int standby = controller.config().run.standby; standby > 0) {
        controller.foresee(fresh_sizes_from(p, steps, s, standby), step.mode == Mode::fresh);
      }
      progress.starting(results.size(), step.mode, p.cases[step.i]);
      ExecutionResult r = controller.run(p.cases[step.i], step.mode, p.placement);
      if (r.interrupted) break;
      r.attempt = step.rep + 1;
      results.push_back(std::move(r));
      store.submit(results.back(), p.case_ids[step.i]);
      progress.finished(results.size(), results.back(), p.cases[step.i]);
      if (!controller.cannot_go_on().empty()) {  // no node left for the next world
        out.stopped = "the loss of its nodes (" + controller.cannot_go_on() + ")";
        break;
      }
      // --fail-fast judges a case once its last mode of this repeat ran.
      const bool case_done =
          s + 1 == steps.size() || steps[s + 1].i != step.i || steps[s + 1].rep != step.rep;
      if (p.fail_fast && case_done) {
        out.stopped =
            fail_fast_reason(p, step.i, results,
                             [](const ExecutionResult& e) -> const ExecutionResult& { return e; });
        if (out.stopped) break;
      }
    }
    // Every way out of the loop (the plan done, --fail-fast, an interruption) comes here: the
    // judgement, the run's exit code and any reader of the store come after every result.
    store.drain();
  }
  if (results.size() == total) out.stopped.reset();  // the last case: the plan was done anyway
  out.results.assign(std::make_move_iterator(results.begin()),
                     std::make_move_iterator(results.end()));
  return out;
}

namespace {

// What the job threads of run_plan_jobs share, each field under `mu`.
struct JobsState {
  std::mutex mu;
  // The steps left: every pooled one belongs to one job, in order; a fresh one to whoever is
  // free first. Each job takes the earlier of its own next pooled step and the next fresh one.
  std::vector<std::deque<std::size_t>> pooled;
  std::deque<std::size_t> fresh;
  // Results stay put while the queue reads them; each with its step, to give them back in order.
  std::deque<std::pair<std::size_t, ExecutionResult>> results;
  std::map<std::pair<int, std::size_t>, std::size_t> modes_done;  // (repeat, case) -> modes run
  bool stop = false;
  std::optional<std::string> stopped;
  std::exception_ptr error;
};

// One job: takes the next step until none is left or the run stops, in its own controller.
void run_job(const RecordPlan& p, const std::vector<Step>& steps, int job,
             const MakeController& make, JobsState& st, RecordQueue& store,
             ProgressReport& progress) {
  std::unique_ptr<Controller> controller;
  try {
    controller = make(job);
    const int standby = controller->config().run.standby;
    for (;;) {
      std::size_t s = 0, done = 0;
      std::vector<int> ahead;
      {
        std::lock_guard lock(st.mu);
        std::deque<std::size_t>& mine = st.pooled[job];
        if (st.stop || (mine.empty() && st.fresh.empty())) break;
        std::deque<std::size_t>& from =
            st.fresh.empty() || (!mine.empty() && mine.front() < st.fresh.front()) ? mine
                                                                                   : st.fresh;
        s = from.front();
        from.pop_front();
        done = st.results.size();
        if (standby > 0) ahead = fresh_sizes_from(p, steps, s, standby);
      }
      const Step& step = steps[s];
      if (standby > 0) controller->foresee(ahead, step.mode == Mode::fresh);
      progress.starting(done, step.mode, p.cases[step.i]);
      ExecutionResult r = controller->run(p.cases[step.i], step.mode, p.placement);
      std::unique_lock lock(st.mu);
      if (r.interrupted) {
        st.stop = true;
        break;
      }
      r.attempt = step.rep + 1;
      st.results.emplace_back(s, std::move(r));
      const ExecutionResult& kept = st.results.back().second;
      const std::size_t count = st.results.size();
      // --fail-fast judges a case once every mode of this repeat ran, wherever they ran.
      if (p.fail_fast && ++st.modes_done[{step.rep, step.i}] == p.modes.size() && !st.stopped) {
        st.stopped = fail_fast_reason(
            p, step.i, st.results,
            [](const auto& item) -> const ExecutionResult& { return item.second; });
        if (st.stopped) st.stop = true;
      }
      if (!controller->cannot_go_on().empty() && !st.stopped) {  // no node left for any world
        st.stopped = "the loss of its nodes (" + controller->cannot_go_on() + ")";
        st.stop = true;
      }
      lock.unlock();
      store.submit(kept, p.case_ids[step.i]);
      progress.finished(count, kept, p.cases[step.i]);
    }
    controller->close_pools();  // on this thread: its worlds' ranks die with it
  } catch (...) {
    std::lock_guard lock(st.mu);
    if (!st.error) st.error = std::current_exception();
    st.stop = true;
  }
  controller.reset();
}

}  // namespace

PlanRun run_plan_jobs(const RecordPlan& p, int jobs, const MakeController& make,
                      RecordWriter& writer, ProgressStyle style, std::ostream& err) {
  if (jobs <= 1) {
    const std::unique_ptr<Controller> controller = make(0);
    PlanRun out = run_plan(p, *controller, writer, style, err);
    controller->close_pools();
    return out;
  }
  JobsState st;
  const std::vector<Step> steps = steps_of(p);
  // The pooled executions in contiguous parts, one per job: each pooled world sees the cases
  // around it in the plan as one job would, so an earlier case's leak meets the same successors
  // (all but where two parts meet, which is between two cases).
  std::vector<std::size_t> pooled;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    if (steps[s].mode == Mode::pool) {
      pooled.push_back(s);
    } else {
      st.fresh.push_back(s);
    }
  }
  st.pooled.resize(jobs);
  std::size_t begin = 0;
  for (int job = 0; job < jobs; ++job) {
    std::size_t end = std::max(begin, pooled.size() * (job + 1) / jobs);
    // A part ends between two cases, never between the grid points of one: an earlier point
    // that leaks state meets its later ones in the same world, as with one job.
    const auto name = [&](std::size_t k) { return p.cases[steps[pooled[k]].i].info.name; };
    while (end > 0 && end < pooled.size() && name(end) == name(end - 1)) ++end;
    st.pooled[job].assign(pooled.begin() + begin, pooled.begin() + end);
    begin = end;
  }
  {
    RecordQueue store(writer);  // destroyed before `st`, writing what is still queued
    ProgressReport progress(style, err, steps.size());
    {
      std::vector<std::jthread> threads;
      try {
        for (int job = 0; job < jobs; ++job) {
          threads.emplace_back([&, job] { run_job(p, steps, job, make, st, store, progress); });
        }
      } catch (...) {  // a thread that could not start: the others stop after their execution
        std::lock_guard lock(st.mu);
        if (!st.error) st.error = std::current_exception();
        st.stop = true;
      }
    }  // every job joined
    store.drain();
  }
  if (st.error) std::rethrow_exception(st.error);
  PlanRun out;
  out.stopped = st.stopped;
  if (st.results.size() == steps.size()) out.stopped.reset();  // the plan was done anyway
  std::sort(st.results.begin(), st.results.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [step, r] : st.results) out.results.push_back(std::move(r));
  return out;
}

}  // namespace cprr

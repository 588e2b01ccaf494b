// World, second half: dispatching one execution to the ranks and collecting every rank's answer,
// with the checks made while they run (a rank gone, a deadline, collectives called differently).
// The first half (world.cpp) spawns, starts and ends worlds.
#include <fmt/ranges.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/channels.h"
#include "analysis/classify.h"
#include "analysis/layout_check.h"
#include "data/flight_record.h"
#include "recorder/engine/world.h"
#include "recorder/launch/proc_tree.h"
#include "recorder/launch/wait_text.h"
#include "runtime/error.h"

namespace cprr {
namespace {

// How often collect() looks for ranks stuck in a collective they called differently: the bound
// on how late such a mismatch is named (reading W small files each time).
constexpr std::chrono::milliseconds kLiveCheckInterval{20};

}  // namespace

std::optional<std::string> World::idle_fault() {
  for (int r = 0; r < size(); ++r) {
    if (const auto& exit = ranks_[r].process->poll()) {
      reusable_ = false;
      return fmt::format("rank {} {} between cases", r, exit->describe());
    }
    if (const std::string lost = ranks_[r].process->lost(); !lost.empty()) {
      reusable_ = false;
      return fmt::format("rank {} between cases: {}", r, lost);
    }
    pollfd p{ranks_[r].control.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      reusable_ = false;
      return fmt::format(
          "rank {} {} between cases", r,
          (p.revents & POLLHUP) != 0 ? "closed its control channel" : "sent unasked data");
    }
  }
  if (std::string why = infrastructure_fault(); !why.empty()) {
    reusable_ = false;
    return why + " between cases";
  }
  return std::nullopt;
}

void World::start(const RunCase& msg) {
  // What ranks of this or an earlier world left behind and this process inherited as a
  // subreaper, and that ended since: a pooled world may live for the whole run.
  reap_orphans();
  logs_.drain_now();  // output written between cases belongs to neither
  const std::string frame = encode(ToRank{msg});
  for (int r = 0; r < size(); ++r) {
    ranks_[r].out_mark = logs_.mark(2 * r);
    ranks_[r].err_mark = logs_.mark(2 * r + 1);
  }
  for (Rank& rank : ranks_) {
    try {
      write_frame(rank.control.get(), frame);
    } catch (const std::exception&) {
      // A rank that died since the last case shows up as EOF in collect().
    }
  }
}

bool World::pump(int r, uint64_t execution, RankReport& report) {
  Rank& rank = ranks_[r];
  FrameReader::Fill fill;
  do {
    fill = rank.reader.fill(rank.control.get());
  } while (fill == FrameReader::Fill::data);
  try {
    while (auto frame = rank.reader.next()) {
      FromRank msg = decode_from_rank(*frame);
      if (auto* done = std::get_if<CaseDone>(&msg)) {
        CPRR_CHECK(done->execution == execution,
                   "rank {} sent a result for execution {} while {} was running", r,
                   done->execution, execution);
        report.done = std::move(*done);
      } else if (auto* status = std::get_if<WatchdogStatus>(&msg)) {
        report.watchdog = std::move(*status);
      } else {
        CPRR_THROW("rank {} sent an unexpected catalog", r);
      }
    }
  } catch (const std::exception& e) {
    report.protocol_error = e.what();
    reusable_ = false;
  }
  return fill != FrameReader::Fill::eof;
}

std::vector<RankReport> World::collect(uint64_t execution, Clock::time_point deadline,
                                       std::chrono::milliseconds after_death) {
  std::vector<RankReport> reports(ranks_.size());
  stopped_early_.clear();
  live_seen_.clear();
  failed_at_ = {};
  returned_at_.assign(ranks_.size(), Clock::time_point{});
  auto next_check = Clock::now() + kLiveCheckInterval;
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<int> idx;
    for (int r = 0; r < size(); ++r) {
      const RankReport& rep = reports[r];
      if (!rep.done && !ranks_[r].eof && rep.protocol_error.empty()) {
        fds.push_back(pollfd{ranks_[r].control.get(), POLLIN, 0});
        idx.push_back(r);
      }
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (fds.empty() || left.count() <= 0 || stop_requested()) break;
    if (size() > 1 && Clock::now() >= next_check) {
      if (blocked_in_mismatch(execution, reports) || blocked_on_departure(execution, reports)) {
        break;
      }
      next_check = Clock::now() + kLiveCheckInterval;
    }
    if (stop_fd_ >= 0) fds.push_back(pollfd{stop_fd_, POLLIN, 0});  // last: no rank index
    // Woken at the next live check when the world has several ranks.
    const auto wait = size() > 1 ? std::min(left, kLiveCheckInterval) : left;
    if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) <= 0) continue;
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (fds[k].revents == 0) continue;
      const int r = idx[k];
      if (!pump(r, execution, reports[r])) {
        on_eof(r, reports[r]);
        deadline = std::min(deadline, Clock::now() + after_death);
      } else if (has_failed(reports[r]) && size() > 1) {
        // A rank that raised takes no further part: the others get what a crash's survivors
        // get, and the live check releases at once those waiting in a collective it left.
        deadline = std::min(deadline, Clock::now() + after_death);
        if (failed_at_ == Clock::time_point{}) failed_at_ = Clock::now();
        next_check = Clock::now();
      } else if (reports[r].done && size() > 1) {
        // It returned: a peer waiting in a call it never entered is released at the next check.
        returned_at_[r] = Clock::now();
        next_check = Clock::now();
      }
    }
  }
  if (stopped_early_.empty() && !stop_requested()) note_released_at_grace(reports);
  return reports;
}

std::vector<std::optional<FlightLog>> World::returned_flights(
    uint64_t execution, const std::vector<RankReport>& reports) const {
  std::vector<std::optional<FlightLog>> flights(ranks_.size());
  for (int r = 0; r < size(); ++r) {
    if (reports[r].done && reports[r].done->outcome == RankOutcome::ok) {
      flights[r] = read_flight_log(flight_record_path(rendezvous_, r), execution);
    }
  }
  return flights;
}

bool World::blocked_on_departure(uint64_t execution, const std::vector<RankReport>& reports) {
  // A rank that failed or returned calls no more: what it never entered can never complete.
  // The returned ranks' flight records, read once if needed, and their calls by rank.
  std::vector<std::optional<FlightLog>> flights;
  std::vector<const std::vector<CollectiveRecord>*> entered;
  for (int r = 0; r < size(); ++r) {
    if (reports[r].done || ranks_[r].eof) continue;
    const std::optional<FlightLog> log =
        read_flight_log(flight_record_path(rendezvous_, r), execution);
    if (!log) continue;
    if (const std::optional<LeftBehind> left = left_by_failure(reports, r, log->entered)) {
      stopped_early_ = fmt::format(
          "stopped {:.1f} ms after rank {} failed, not at the deadline: rank {} had entered {}, "
          "which rank {} never did",
          std::chrono::duration<double, std::milli>(Clock::now() - failed_at_).count(), left->by, r,
          call_phrase(left->call), left->by);
      return true;
    }
    // A lone return, decided when it happens, not at the deadline: only the call the
    // rank entered last, the one it can be waiting in. An earlier one it entered may have ended
    // without the peer (it raised, as a test of timeouts expects, or a send was buffered): the
    // rank went on, and may be finishing the case as well.
    if (log->entered.empty()) continue;
    if (flights.empty()) {
      flights = returned_flights(execution, reports);
      for (const std::optional<FlightLog>& f : flights) {
        entered.push_back(f ? &f->entered : nullptr);
      }
    }
    if (const std::optional<LeftBehind> left =
            left_by_return(reports, r, {log->entered.back()}, &entered)) {
      stopped_early_ = fmt::format(
          "stopped {:.1f} ms after rank {} returned from the case, not at the deadline: rank {} "
          "had entered {}, which rank {} never did",
          std::chrono::duration<double, std::milli>(Clock::now() - returned_at_[left->by]).count(),
          left->by, r, call_phrase(left->call, true), left->by);
      return true;
    }
  }
  return false;
}

void World::note_released_at_grace(const std::vector<RankReport>& reports) {
  // The rank the summary names (classify), so the note and the status agree on who failed.
  const int failed = failed_rank(reports);
  std::vector<int> running;
  for (int r = 0; r < size(); ++r) {
    if (!reports[r].done && !ranks_[r].eof && reports[r].protocol_error.empty()) {
      running.push_back(r);
    }
  }
  if (failed < 0 || running.empty()) return;
  stopped_early_ =
      fmt::format("stopped {:.1f} s after rank {} failed, with rank{} {} still running",
                  std::chrono::duration<double>(Clock::now() - failed_at_).count(), failed,
                  running.size() > 1 ? "s" : "", fmt::join(running, ","));
}

bool World::blocked_in_mismatch(uint64_t execution, const std::vector<RankReport>& reports) {
  // A rank that finished or ended is blocked in nothing: blocked_mismatch decides per group,
  // among the ranks still running.
  std::vector<FlightLog> logs(size());
  bool any = false;
  for (int r = 0; r < size(); ++r) {
    if (reports[r].done || ranks_[r].eof) continue;
    std::optional<FlightLog> log = read_flight_log(flight_record_path(rendezvous_, r), execution);
    if (!log || log->entered.empty()) continue;
    logs[r] = std::move(*log);
    any = true;
  }
  if (!any) return false;
  std::vector<const std::vector<CollectiveRecord>*> calls;
  for (const FlightLog& l : logs) calls.push_back(l.entered.empty() ? nullptr : &l.entered);
  const std::optional<CollectiveMismatch> m = blocked_mismatch(calls);
  if (!m) {
    live_seen_.clear();
    return false;
  }
  // Seen once, it may be a rank that just returned from #k and works on the host: only the same
  // picture one check later, with nothing entered since, stops the wait.
  std::vector<std::size_t> seen;
  for (const FlightLog& l : logs) seen.push_back(l.entered.size());
  if (seen != live_seen_) {
    live_seen_ = std::move(seen);
    live_first_ = Clock::now();
    return false;
  }
  std::string when;
  if (agents_ == nullptr) {
    // Local ranks share this host's steady clock, which the entries' times are on.
    int64_t last_ns = 0;
    for (const FlightLog& l : logs) {
      if (!l.entered_ns.empty()) last_ns = std::max(last_ns, l.entered_ns.back());
    }
    const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
    when = fmt::format("{:.1f} ms after the last rank entered",
                       static_cast<double>(now_ns - last_ns) / 1e6);
  } else {
    when =
        fmt::format("{:.1f} ms after every rank was first seen in",
                    std::chrono::duration<double, std::milli>(Clock::now() - live_first_).count());
  }
  stopped_early_ = fmt::format(
      "stopped {} {} #{}, which the ranks called differently ({}), instead of waiting out the "
      "deadline",
      when, m->p2p ? "message" : "collective", m->seq, m->describe());
  return true;
}

void World::on_eof(int r, RankReport& report) {
  Rank& rank = ranks_[r];
  rank.eof = true;
  reusable_ = false;
  report.exit = rank.process->wait(2000);
  // A rank that closed its channel (or had it closed by case code) but lives on cannot report:
  // that is its failure, and it is told apart from a hang. A launched rank whose supervisor is
  // gone too is lost with its host or launcher: that is named instead.
  if (!report.exit && report.protocol_error.empty() && !rank.process->lost().empty()) {
    report.protocol_error = rank.process->lost();
  }
  if (!report.exit && report.protocol_error.empty()) {
    report.protocol_error = rank.reader.mid_frame()
                                ? "closed its control channel inside a frame, still running"
                                : "closed its control channel mid-case, still running";
  }
}

std::string World::end_leftovers(const std::string& after) {
  if (agents_ != nullptr) return {};  // on other hosts: their agents end what ranks leave
  // Nothing forked anywhere since the last look: nothing new can be running.
  const std::optional<pid_t> last = last_created_pid();
  if (last && last == swept_at_) return {};
  swept_at_ = last;
  // Per rank, and -1 for orphans of the world's ranks reparented here (their rank ended, or
  // the process that forked them did): still in the world's process group.
  std::map<int, std::vector<pid_t>> left;
  for (int r = 0; r < size(); ++r) {
    const pid_t pid = ranks_[r].process->local_pid();
    if (pid <= 0) continue;
    for (pid_t p : descendants(pid)) {
      if (std::find(ranks_[r].started_with.begin(), ranks_[r].started_with.end(), p) ==
          ranks_[r].started_with.end()) {
        left[r].push_back(p);
      }
    }
  }
  if (group_ > 0) {
    if (std::vector<pid_t> orphans = unowned_trees(group_); !orphans.empty()) {
      left[-1] = std::move(orphans);
    }
  }
  std::vector<std::string> said;
  for (const auto& [r, pids] : left) {
    said.push_back(fmt::format("{} left {} process{} running after {}: {}, killed",
                               r < 0 ? "a rank that ended" : fmt::format("rank {}", r), pids.size(),
                               pids.size() == 1 ? "" : "es", after, kill_and_name(pids)));
  }
  reap_orphans();
  return fmt::format("{}", fmt::join(said, "; "));
}

void World::query_status(uint64_t execution, std::vector<RankReport>& reports,
                         std::chrono::milliseconds grace) {
  const std::string query = encode(ToRank{StatusQuery{execution}});
  std::vector<int> waiting;
  for (int r = 0; r < size(); ++r) {
    if (reports[r].done || ranks_[r].eof) continue;
    try {
      write_frame(ranks_[r].control.get(), query);
      waiting.push_back(r);
    } catch (const std::exception&) {
    }
  }
  // All asked ranks are polled together until each answered or the grace period is over; the
  // last round (timeout 0) still drains what every channel holds.
  const auto deadline = Clock::now() + grace;
  for (bool last = false; !last;) {
    std::erase_if(waiting, [&](int r) {
      return reports[r].watchdog || !reports[r].protocol_error.empty() || ranks_[r].eof;
    });
    if (waiting.empty()) break;
    std::vector<pollfd> fds;
    for (int r : waiting) fds.push_back(pollfd{ranks_[r].control.get(), POLLIN, 0});
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    last = left.count() <= 0;
    if (::poll(fds.data(), fds.size(), last ? 0 : static_cast<int>(left.count())) <= 0) break;
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents != 0 && !pump(waiting[k], execution, reports[waiting[k]])) {
        ranks_[waiting[k]].eof = true;  // the hang is already its verdict; kill() reaps it
      }
    }
  }
}

}  // namespace cprr

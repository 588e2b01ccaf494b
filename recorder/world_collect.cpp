// World: dispatching one execution and collecting every rank's answer.
#include <poll.h>

#include "recorder/world.h"
#include "runtime/error.h"

namespace cprr {

std::optional<std::string> World::idle_fault() {
  for (int r = 0; r < size(); ++r) {
    if (const auto& exit = ranks_[r].process.poll()) {
      reusable_ = false;
      return fmt::format("rank {} {} between cases", r, exit->describe());
    }
    pollfd p{ranks_[r].control.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      reusable_ = false;
      return fmt::format("rank {} {} between cases", r,
                         (p.revents & POLLHUP) != 0 ? "closed its control channel" : "sent unasked data");
    }
  }
  return std::nullopt;
}

void World::start(const RunCase& msg) {
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
    if (fds.empty() || left.count() <= 0) break;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) <= 0) continue;
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      const int r = idx[k];
      if (!pump(r, execution, reports[r])) {
        ranks_[r].eof = true;
        reusable_ = false;
        reports[r].exit = ranks_[r].process.wait(2000);
        deadline = std::min(deadline, Clock::now() + after_death);
      }
    }
  }
  return reports;
}

void World::query_status(uint64_t execution, std::vector<RankReport>& reports,
                         std::chrono::milliseconds grace) {
  const std::string query = encode(ToRank{StatusQuery{execution}});
  std::vector<int> asked;
  for (int r = 0; r < size(); ++r) {
    if (reports[r].done || ranks_[r].eof) continue;
    try {
      write_frame(ranks_[r].control.get(), query);
      asked.push_back(r);
    } catch (const std::exception&) {
    }
  }
  const auto deadline = Clock::now() + grace;
  for (int r : asked) {
    while (!reports[r].watchdog && reports[r].protocol_error.empty()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      pollfd p{ranks_[r].control.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      if (!pump(r, execution, reports[r])) break;
    }
  }
}

}  // namespace cprr

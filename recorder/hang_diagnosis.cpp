// diagnose_hang: line up the ranks' collective progress to name who never joined what.
#include <algorithm>

#include <fmt/ranges.h>

#include "recorder/controller.h"

namespace cprr {
namespace {

struct Progress {
  int64_t last = -1;  // last collective this rank entered (or logged, if it finished)
  std::string kind;
  std::string doing;
};

Progress progress_of(const RankReport& rep) {
  Progress p;
  if (rep.done) {
    const auto& log = rep.done->capture.collectives;
    if (!log.empty()) {
      p.last = static_cast<int64_t>(log.back().seq);
      p.kind = log.back().kind;
    }
    p.doing = "finished the case";
  } else if (rep.watchdog) {
    const WatchdogStatus& w = *rep.watchdog;
    p.last = w.entered_seq;
    p.kind = w.entered_kind;
    p.doing = w.running.empty() ? "in " + w.phase
                                : fmt::format("in {}: {}", w.phase, fmt::join(w.running, "; "));
    if (w.entered_seq > w.completed_seq) {
      p.doing += fmt::format(" (waiting in collective #{} {})", w.entered_seq, w.entered_kind);
    }
  } else {
    p.doing = "no answer from its watchdog";
  }
  return p;
}

}  // namespace

std::string diagnose_hang(const std::vector<RankReport>& ranks) {
  std::vector<Progress> ps;
  for (const auto& r : ranks) ps.push_back(progress_of(r));
  const auto top = std::max_element(ps.begin(), ps.end(),
                                    [](const Progress& a, const Progress& b) { return a.last < b.last; });
  std::vector<std::string> parts;
  if (top != ps.end() && top->last >= 0) {
    std::vector<int> behind;
    for (int r = 0; r < static_cast<int>(ps.size()); ++r) {
      if (ps[r].last < top->last) behind.push_back(r);
    }
    if (!behind.empty()) {
      parts.push_back(fmt::format("rank{} {} never joined collective #{} ({})",
                                  behind.size() > 1 ? "s" : "", fmt::join(behind, ","), top->last,
                                  top->kind));
    }
  }
  for (int r = 0; r < static_cast<int>(ps.size()); ++r) {
    parts.push_back(fmt::format("rank {}: {}, last collective #{}", r, ps[r].doing, ps[r].last));
  }
  return "hang: " + fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace cprr

#include "analysis/hang_diagnosis.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace cprr {
namespace {

struct Progress {
  bool known = true;  // false: its watchdog never answered, so where it is cannot be told
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
    p.known = false;
    p.doing = "no answer from its watchdog";
  }
  return p;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return fmt::format("rank{} {}", ranks.size() > 1 ? "s" : "", fmt::join(ranks, ","));
}

}  // namespace

std::string diagnose_hang(const std::vector<RankReport>& ranks) {
  std::vector<Progress> ps;
  for (const auto& r : ranks) ps.push_back(progress_of(r));
  // Only ranks that answered (or finished) are lined up: a silent rank's progress is unknown,
  // so it is named as silent, never counted among those that "never joined".
  const Progress* top = nullptr;
  std::vector<int> silent;
  for (int r = 0; r < static_cast<int>(ps.size()); ++r) {
    if (!ps[r].known) silent.push_back(r);
    if (ps[r].known && (top == nullptr || ps[r].last > top->last)) top = &ps[r];
  }
  std::vector<std::string> parts;
  if (!silent.empty()) parts.push_back(ranks_phrase(silent) + " gave no answer from the watchdog");
  if (top != nullptr && top->last >= 0) {
    std::vector<int> behind;
    for (int r = 0; r < static_cast<int>(ps.size()); ++r) {
      if (ps[r].known && ps[r].last < top->last) behind.push_back(r);
    }
    if (!behind.empty()) {
      parts.push_back(fmt::format("{} never joined collective #{} ({})", ranks_phrase(behind),
                                  top->last, top->kind));
    }
  }
  for (int r = 0; r < static_cast<int>(ps.size()); ++r) {
    parts.push_back(
        ps[r].known ? fmt::format("rank {}: {}, last collective #{}", r, ps[r].doing, ps[r].last)
                    : fmt::format("rank {}: {}", r, ps[r].doing));
  }
  return "hang: " + fmt::format("{}", fmt::join(parts, "; "));
}

std::string describe_released(const std::vector<RankReport>& ranks, int failed) {
  std::vector<std::string> parts;
  std::vector<int> released;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const RankReport& rep = ranks[r];
    if (rep.done || rep.exit || !rep.protocol_error.empty()) continue;
    released.push_back(r);
    const Progress p = progress_of(rep);
    parts.push_back(p.known ? fmt::format("rank {} was {}", r, p.doing)
                            : fmt::format("rank {} gave {}", r, p.doing));
  }
  if (released.empty()) return {};
  return fmt::format("{} when rank {} failed: {} ended with its world, which is replaced",
                     fmt::join(parts, "; "), failed, released.size() > 1 ? "they were" : "it was");
}

}  // namespace cprr

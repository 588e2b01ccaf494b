#include "recorder/engine/rank_process.h"

#include <poll.h>

#include <chrono>

#include "runtime/error.h"

namespace cprr {

RemoteRank::RemoteRank(UniqueFd supervisor, std::string where)
    : fd_(std::move(supervisor)), where_(std::move(where)) {}

void RemoteRank::pump(int timeout_ms) {
  if (exit_ || !lost_.empty()) return;
  pollfd p{fd_.get(), POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return;
  const FrameReader::Fill fill = reader_.fill(fd_.get());
  try {
    while (auto frame = reader_.next()) exit_ = decode_rank_exited(*frame).exit;
  } catch (const std::exception& e) {
    lost_ = fmt::format("{} broke the protocol: {}", where_, e.what());
  }
  if (fill == FrameReader::Fill::eof && !exit_ && lost_.empty()) {
    lost_ = fmt::format(
        "the connection to {}, which supervised it, was lost: its host, the launcher or the "
        "agent died",
        where_);
  }
}

const std::optional<ExitInfo>& RemoteRank::poll() {
  pump(0);
  return exit_;
}

const std::optional<ExitInfo>& RemoteRank::wait(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!exit_ && lost_.empty()) {
    int left = -1;
    if (timeout_ms >= 0) {
      left = static_cast<int>(
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
              .count());
      if (left <= 0) break;
    }
    pump(left);
  }
  return exit_;
}

void RemoteRank::signal(int sig) {
  if (exit_ || !lost_.empty()) return;
  try {
    write_frame(fd_.get(), encode(SignalRank{sig}));
  } catch (const std::exception&) {
    // A broken connection shows up as lost() on the next poll.
  }
}

}  // namespace cprr

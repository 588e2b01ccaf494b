#include "recorder/rank/rank_channel.h"

#include <sys/socket.h>

#include <cstdio>

namespace cprr {
namespace {

constexpr std::size_t kKeptFrameBytes = std::size_t{16} << 20;

}  // namespace

RankChannel::RankChannel(UniqueFd fd) : fd_(std::move(fd)) {}

RankChannel::~RankChannel() {
  if (reader_.joinable()) {
    ::shutdown(fd_.get(), SHUT_RDWR);  // wakes the reader's blocking read
    reader_.join();
  }
}

void RankChannel::send_hello(const Hello& hello) {
  std::lock_guard lock(write_mu_);
  write_frame(fd_.get(), encode_hello(hello));
}

void RankChannel::send(const FromRank& msg) {
  std::lock_guard lock(write_mu_);  // also guards frame_, reused from frame to frame
  encode_frame(msg, frame_);
  write_encoded_frame(fd_.get(), frame_);
  // Keep the capacity a typical CaseDone needs, not what one huge op log once took.
  if (frame_.capacity() > kKeptFrameBytes) std::string().swap(frame_);
}

void RankChannel::start(Watchdog watchdog) {
  reader_ = std::thread([this, w = std::move(watchdog)] { read_loop(w); });
}

void RankChannel::push(ToRank msg) {
  {
    std::lock_guard lock(queue_mu_);
    queue_.push_back(std::move(msg));
  }
  queue_cv_.notify_one();
}

void RankChannel::read_loop(const Watchdog& watchdog) {
  FrameReader reader;
  try {
    while (auto frame = read_frame(fd_.get(), reader)) {
      ToRank msg = decode_to_rank(*frame);
      if (const auto* q = std::get_if<StatusQuery>(&msg)) {
        WatchdogStatus s = watchdog.status();
        if (s.execution == 0) s.execution = q->execution;
        send(FromRank{std::move(s)});
      } else if (std::holds_alternative<Abort>(msg)) {
        watchdog.abort();  // does not return: the main thread may be stuck in the case
      } else {
        push(std::move(msg));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpworker: control channel: %s\n", e.what());
  }
  push(Shutdown{});
}

ToRank RankChannel::next() {
  std::unique_lock lock(queue_mu_);
  queue_cv_.wait(lock, [this] { return !queue_.empty(); });
  ToRank msg = std::move(queue_.front());
  queue_.pop_front();
  return msg;
}

}  // namespace cprr

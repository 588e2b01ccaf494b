#pragma once
// The rank's end of its control channel. A reader thread (the watchdog) owns all reads: it
// answers StatusQuery at once, from any state, and queues the other commands for the main thread.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "recorder/protocol/protocol.h"
#include "runtime/fd.h"

namespace cprr {

class RankChannel {
 public:
  explicit RankChannel(UniqueFd fd);
  /// Stops and joins the reader thread.
  ~RankChannel();
  RankChannel(const RankChannel&) = delete;
  RankChannel& operator=(const RankChannel&) = delete;

  void send_hello(const Hello& hello);
  /// Sends one message; safe from any thread.
  void send(const FromRank& msg);
  /// What the watchdog/reader thread does for the messages it handles itself.
  struct Watchdog {
    std::function<WatchdogStatus()> status;  ///< answers every StatusQuery
    std::function<void()> abort;             ///< Abort: end stuck collectives and exit
  };
  /// Starts the watchdog/reader thread.
  void start(Watchdog watchdog);
  /// The next Bootstrap, RunCase or Shutdown. EOF or a protocol error from the controller reads as
  /// Shutdown (the error is printed to stderr first).
  ToRank next();

 private:
  void read_loop(const Watchdog& watchdog);
  void push(ToRank msg);

  UniqueFd fd_;
  std::mutex write_mu_;
  std::string frame_;  ///< the last frame sent; its capacity serves the next (under write_mu_)
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<ToRank> queue_;
  std::thread reader_;
};

}  // namespace cprr

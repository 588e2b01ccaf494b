// The template process's wire end to end: requests encoded here (recorder/launch/fork_request.h)
// read by the template (python/cprr/rank/fork_request.py). One it cannot read is refused with what
// is wrong with it, and it serves the next; a good one forks a rank that becomes this process's
// child (a subreaper) and runs the worker loop; the template ends when its socket closes.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "recorder/launch/fork_request.h"
#include "recorder/launch/process.h"
#include "recorder/protocol/protocol.h"
#include "runtime/fd.h"
#include "tests/recorder/engine/python/template_support.h"

namespace cprr {
namespace {

using namespace template_test;
using ::testing::HasSubstr;

constexpr int kReplyTimeoutMs = 60000;  // the first reply waits for the template's imports

// A template process started by hand, as TemplateSpawner starts one.
class ManualTemplate {
 public:
  explicit ManualTemplate(const fs::path& cases)
      : devnull_(::open("/dev/null", O_RDWR | O_CLOEXEC)) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    ours_.reset(sv[0]);
    UniqueFd theirs(sv[1]);
    SpawnSpec spec;
    spec.argv = {kPyWorker, "--cases", cases.string(), "--template", std::to_string(slot_)};
    spec.fds = {{devnull_.get(), 0}, {devnull_.get(), 1}, {2, 2}, {theirs.get(), slot_}};
    spec.env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
    process_ = ChildProcess::spawn(spec);
  }

  /// Sends `frame` with `fds` and returns the reply.
  ForkReply ask(const std::string& frame, const std::vector<std::pair<int, int>>& fds) {
    send_fork_frame(ours_.get(), frame, fds);
    const auto reply = read_frame(ours_.get(), reader_, kReplyTimeoutMs);
    if (!reply) throw std::runtime_error("the template closed its socket");
    return decode_fork_reply(*reply);
  }

  int devnull() const { return devnull_.get(); }
  int slot() const { return slot_; }
  void close_socket() { ours_.reset(); }
  ChildProcess& process() { return process_; }

 private:
  UniqueFd devnull_;
  UniqueFd ours_;
  FrameReader reader_;
  const int slot_ = control_fd_slot();
  ChildProcess process_;
};

// A rank of a one-rank world that sends its catalog on `control` (at its slot) and exits.
ForkRequest catalog_request(const ManualTemplate& t, const fs::path& cases, int control) {
  ForkRequest r;
  r.controller = ::getpid();
  r.fds = {{t.devnull(), 0}, {t.devnull(), 1}, {2, 2}, {control, t.slot()}};
  r.argv = {kPyWorker, "--cases",      cases.string(),           "--rank",   "0", "--world-size",
            "1",       "--control-fd", std::to_string(t.slot()), "--catalog"};
  SpawnSpec spec;
  spec.env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
  r.env = child_environment(spec);
  return r;
}

// The request's frame with the first `from` replaced by `to` (of the same length, so that the
// frame's length still holds).
std::string tampered(std::string frame, const std::string& from, const std::string& to) {
  const auto at = frame.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(from.size(), to.size());
  return frame.replace(at, from.size(), to);
}

TEST(TemplateWire, RefusesWhatItCannotReadThenForksARankThatBecomesOurs) {
  become_subreaper();
  CaseDir dir("cases");
  ManualTemplate t(dir.path());
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd control(sv[0]), rank_end(sv[1]);
  ForkRequest request = catalog_request(t, dir.path(), rank_end.get());
  request.controller = 424242;  // a pid no test process has, and easy to find in the frame
  const std::string frame = encode_fork_request(request);

  ForkReply r = t.ask(tampered(frame, "cprr-fork/1", "cprr-fork/9"), request.fds);
  EXPECT_THAT(r.error,
              HasSubstr("malformed fork request: the request does not start with cprr-fork/1"));
  r = t.ask(tampered(frame, "424242", "42424x"), request.fds);
  EXPECT_THAT(r.error, HasSubstr("the controller's pid is '42424x', not a whole number"));
  r = t.ask(frame, {request.fds.begin(), request.fds.end() - 1});
  EXPECT_THAT(r.error, HasSubstr("names 4 descriptor(s) but 3 came with it"));

  request.controller = ::getpid();
  ChildArrival arrival;
  r = t.ask(encode_fork_request(request), request.fds);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ChildProcess rank = arrival.take(r.pid);
  rank_end.reset();
  FrameReader reader;
  const auto hello = read_frame(control.get(), reader, 30000);
  ASSERT_TRUE(hello.has_value()) << "the forked rank said nothing";
  EXPECT_EQ(decode_hello(*hello).pid, r.pid);
  const auto catalog = read_frame(control.get(), reader, 30000);
  ASSERT_TRUE(catalog.has_value());
  const FromRank msg = decode_from_rank(*catalog);
  ASSERT_TRUE(std::holds_alternative<Catalog>(msg));
  std::vector<std::string> names;
  for (const CaseInfo& c : std::get<Catalog>(msg).cases) names.push_back(c.name);
  EXPECT_THAT(names, ::testing::Contains("tmpl/all_reduce"));
  // This process's child: waited for as a spawned rank is.
  const auto& exit = rank.wait(30000);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, 0);
  EXPECT_EQ(exit->exit_code, 0);

  t.close_socket();  // the controller is done with it: it ends by itself
  const auto& ended = t.process().wait(10000);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->exit_code, 0);
  EXPECT_EQ(reap_orphans(), 0);  // the template reaped its intermediate children itself
}

TEST(TemplateWire, AStreamItCannotTrustEndsTheTemplate) {
  CaseDir dir("cases");
  ManualTemplate t(dir.path());
  std::string too_long(4, '\xff');  // a length of 4 GiB: no frame can follow it
  const ForkReply r = t.ask(too_long, {});
  EXPECT_THAT(r.error, HasSubstr("a request of 4294967295 bytes"));
  const auto& ended = t.process().wait(10000);
  ASSERT_TRUE(ended.has_value());
  EXPECT_NE(ended->exit_code, 0);
}

}  // namespace
}  // namespace cprr

// Framing over a real socketpair (recorder/protocol/protocol.h): little-endian length then
// payload, frames back to back or split over reads reassembled, EOF before and inside a frame,
// the length limit, non-blocking reads, and a read's deadline kept across a signal.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "recorder/launch/proc_tree.h"
#include "recorder/protocol/protocol.h"
#include "runtime/error.h"
#include "runtime/fd.h"
#include "tests/recorder/protocol/protocol_support.h"

namespace cprr {
namespace {

using namespace std::string_literals;
using namespace protocol_test;  // NOLINT(google-build-using-namespace): this folder's own helpers

// ---- framing ----

TEST(Frame, WriteFrameIsLittleEndianLengthThenPayload) {
  SocketPair sp;
  write_frame(sp.a.get(), "abc"s + '\0');
  sp.a.reset();
  char buf[16];
  const ssize_t n = ::read(sp.b.get(), buf, sizeof buf);
  ASSERT_EQ(n, 8);
  EXPECT_EQ(std::string(buf, 8), "\x04\0\0\0abc\0"s);
}

TEST(Frame, BackToBackFramesAreAllRead) {
  SocketPair sp;
  const std::vector<std::string> payloads = {encode(FromRank{sample_case_done()}),
                                             "",
                                             "x",
                                             std::string(1000, '\0'),
                                             encode_hello(sample_hello()),
                                             encode(ToRank{Shutdown{}})};
  // Everything is in the socket before the first read, so one read() returns many frames; the
  // reader must keep the bytes of later frames for later calls.
  for (const std::string& p : payloads) write_frame(sp.a.get(), p);
  sp.a.reset();
  FrameReader reader;
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    std::optional<std::string> f = read_frame(sp.b.get(), reader);
    ASSERT_TRUE(f.has_value()) << "frame " << i << " lost";
    EXPECT_EQ(*f, payloads[i]) << "frame " << i;
  }
  EXPECT_FALSE(reader.mid_frame());
  EXPECT_EQ(read_frame(sp.b.get(), reader), std::nullopt);
  EXPECT_EQ(read_frame(sp.b.get(), reader), std::nullopt);  // EOF stays EOF
}

TEST(Frame, FramesLargerThanOneReadAreReassembled) {
  SocketPair sp;
  // Larger than the reader's 64 KiB read size and than the socket buffer: a writer thread is
  // needed.
  std::vector<std::string> payloads;
  std::mt19937 rng(7);
  for (std::size_t size :
       {std::size_t{300000}, std::size_t{65531}, std::size_t{1}, std::size_t{1 << 20}}) {
    std::string p(size, '\0');
    for (char& c : p) c = static_cast<char>(rng());
    payloads.push_back(std::move(p));
  }
  std::thread writer([&] {
    for (const std::string& p : payloads) write_frame(sp.a.get(), p);
    sp.a.reset();
  });
  FrameReader reader;
  std::vector<std::string> got;
  while (std::optional<std::string> f = read_frame(sp.b.get(), reader)) got.push_back(*f);
  writer.join();
  ASSERT_EQ(got.size(), payloads.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i] == payloads[i]) << "frame " << i;
}

TEST(Frame, EncodedFramesAreWriteFramesOfTheEncodingAndReuseTheBuffer) {
  // A rank encodes every result into one buffer: a long frame, then a short one, then the long
  // one again must each be exactly what write_frame(encode(msg)) sends.
  CaseDone big = sample_case_done();
  big.capture.outputs[0].digest.chunks.assign(4096, 0x0123456789abcdefULL);  // a 256 MiB capture
  const std::vector<FromRank> msgs = {FromRank{big}, FromRank{WatchdogStatus{}}, FromRank{big}};
  std::string frame;
  SocketPair sp;
  std::thread writer([&] {
    for (const FromRank& m : msgs) {
      encode_frame(m, frame);
      EXPECT_EQ(frame, frame_bytes(encode(m)));
      write_encoded_frame(sp.a.get(), frame);
    }
    sp.a.reset();
  });
  FrameReader reader;
  std::vector<FromRank> got;
  while (std::optional<std::string> f = read_frame(sp.b.get(), reader)) {
    got.push_back(decode_from_rank(*f));
  }
  writer.join();
  ASSERT_EQ(got.size(), msgs.size());
  EXPECT_EQ(std::get<CaseDone>(got[0]), big);
  EXPECT_TRUE(std::holds_alternative<WatchdogStatus>(got[1]));
  EXPECT_EQ(std::get<CaseDone>(got[2]), big);
}

TEST(Frame, WriteEncodedFrameRefusesBytesThatAreNotOneFrame) {
  SocketPair sp;
  EXPECT_THROW(write_encoded_frame(sp.a.get(), "ab"), Error);
  EXPECT_THROW(write_encoded_frame(sp.a.get(), frame_bytes("abc") + "d"), Error);
}

TEST(Frame, EofBeforeAnyFrameReturnsNullopt) {
  SocketPair sp;
  sp.a.reset();
  FrameReader reader;
  EXPECT_EQ(read_frame(sp.b.get(), reader), std::nullopt);
}

TEST(Frame, EofInsideAFrameThrows) {
  const std::string full = frame_bytes("0123456789");
  // Cut inside the length prefix, right after it, and inside the payload.
  for (std::size_t cut :
       {std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{9}, full.size() - 1}) {
    SCOPED_TRACE(cut);
    SocketPair sp;
    write_frame(sp.a.get(), "first");
    write_all(sp.a.get(), std::string_view(full).substr(0, cut));
    sp.a.reset();
    FrameReader reader;
    EXPECT_EQ(read_frame(sp.b.get(), reader), "first");
    EXPECT_TRUE(reader.mid_frame());
    protocol_error([&] { read_frame(sp.b.get(), reader); });
  }
}

TEST(Frame, LengthAboveLimitThrows) {
  SocketPair sp;
  std::string prefix;
  put_u32(prefix, kMaxFrameBytes + 1);
  write_all(sp.a.get(), prefix);
  FrameReader reader;
  // Refused as soon as the prefix is in, without waiting for (or buffering) the payload.
  const std::string msg = protocol_error([&] { read_frame(sp.b.get(), reader); });
  EXPECT_NE(msg.find(std::to_string(kMaxFrameBytes + 1)), std::string::npos) << msg;

  FrameReader direct;
  direct.append("\xff\xff\xff\xff");
  protocol_error([&] { direct.next(); });
}

TEST(Frame, LengthAtLimitIsAccepted) {
  FrameReader reader;
  std::string prefix;
  put_u32(prefix, kMaxFrameBytes);
  reader.append(prefix);
  EXPECT_EQ(reader.next(), std::nullopt);  // waits for the payload instead of refusing
  EXPECT_TRUE(reader.mid_frame());
}

TEST(Frame, ByteAtATimeAppendYieldsTheSameFrames) {
  const std::vector<std::string> payloads = {encode(FromRank{sample_case_done()}), "",
                                             encode(ToRank{StatusQuery{.execution = 9}}),
                                             std::string(3, '\0')};
  std::string stream;
  for (const std::string& p : payloads) stream += frame_bytes(p);
  std::vector<std::size_t> ends;  // stream offset just past each frame
  for (const std::string& p : payloads)
    ends.push_back((ends.empty() ? 0 : ends.back()) + 4 + p.size());
  FrameReader reader;
  std::vector<std::string> got;
  std::size_t complete = 0;  // frames whose last byte has been appended
  for (std::size_t i = 0; i < stream.size(); ++i) {
    reader.append(std::string_view(stream).substr(i, 1));
    while (complete < ends.size() && ends[complete] <= i + 1) ++complete;
    while (std::optional<std::string> f = reader.next()) got.push_back(std::move(*f));
    // A frame comes out exactly when its last byte is in, never earlier or later.
    ASSERT_EQ(got.size(), complete) << "after byte " << i;
    const bool at_boundary = complete > 0 && ends[complete - 1] == i + 1;
    EXPECT_EQ(reader.mid_frame(), !at_boundary) << "after byte " << i;
  }
  EXPECT_EQ(got, payloads);
  EXPECT_FALSE(reader.mid_frame());
  EXPECT_EQ(reader.next(), std::nullopt);
}

TEST(Frame, FillOnNonBlockingSocket) {
  SocketPair sp;
  ASSERT_EQ(::fcntl(sp.b.get(), F_SETFL, ::fcntl(sp.b.get(), F_GETFL) | O_NONBLOCK), 0);
  FrameReader reader;
  EXPECT_EQ(reader.fill(sp.b.get()), FrameReader::Fill::would_block);
  write_frame(sp.a.get(), "ping");
  EXPECT_EQ(reader.fill(sp.b.get()), FrameReader::Fill::data);
  EXPECT_EQ(reader.next(), "ping");
  sp.a.reset();
  EXPECT_EQ(reader.fill(sp.b.get()), FrameReader::Fill::eof);
}

// A signal arriving while read_frame waits (Ctrl-C with cprecord's handler installed) must not
// turn the wait into a blocking read without deadline: the timeout still holds. The signal comes
// once the reader sleeps in its wait; a frame comes only after read_frame returned, or after a
// minute: should the read block, that late frame comes back instead of the timeout.
TEST(ProtocolFraming, ReadFrameKeepsItsDeadlineAcrossASignal) {
  struct sigaction quiet {
  }, previous{};
  quiet.sa_handler = [](int) {};
  sigemptyset(&quiet.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR1, &quiet, &previous), 0);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd mine(sv[0]), peer(sv[1]);
  const pthread_t reader_thread = ::pthread_self();
  const pid_t reader_tid = ::gettid();  // /proc/<tid>/stat: the thread's own state
  std::promise<void> returned;
  std::thread poke([&, done = returned.get_future()] {
    // Sleeping (S) in read_frame's wait: the only blocking call this thread makes from here.
    const auto sleeping = [&] {
      const auto st = proc_stat(reader_tid);
      return st && st->state == 'S';
    };
    for (int i = 0; i < 60000 && !sleeping(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // why: the wait's poll
    ::pthread_kill(reader_thread, SIGUSR1);
    done.wait_for(std::chrono::minutes(1));
    write_frame(peer.get(), "late");
  });
  FrameReader reader;
  EXPECT_THROW(read_frame(mine.get(), reader, 300), ProtocolError);
  returned.set_value();
  poke.join();
  ::sigaction(SIGUSR1, &previous, nullptr);
}

}  // namespace
}  // namespace cprr

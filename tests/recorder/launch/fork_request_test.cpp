// The controller's side of the template process's wire (recorder/launch/fork_request.h): the
// request's bytes field by field, what cannot travel refused, replies read or refused with what is
// wrong. The template's side is tested end to end against these bytes
// (tests/recorder/engine/python/template_wire_test.cpp).
#include "recorder/launch/fork_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "runtime/error.h"

namespace cprr {
namespace {

using namespace std::string_literals;
using ::testing::HasSubstr;

ForkRequest small_request() {
  ForkRequest r;
  r.controller = 77;
  r.process_group = 0;
  r.fds = {{9, 0}, {10, 1023}};
  r.argv = {"/bin/worker", "--rank", "1"};
  r.env = {"A=1", "B="};
  return r;
}

TEST(ForkRequest, IsALengthThenNulTerminatedFields) {
  const std::string payload =
      "cprr-fork/1\0"
      "77\0"
      "0\0"
      "2\0"
      "0\0"
      "1023\0"
      "3\0"
      "/bin/worker\0--rank\0"
      "1\0"
      "2\0"
      "A=1\0B=\0"s;
  const std::string frame = encode_fork_request(small_request());
  ASSERT_EQ(frame.size(), 4 + payload.size());
  EXPECT_EQ(static_cast<unsigned char>(frame[0]), payload.size());  // little-endian length
  EXPECT_EQ(frame.substr(1, 3), "\0\0\0"s);
  EXPECT_EQ(frame.substr(4), payload);
}

TEST(ForkRequest, RefusesWhatCannotTravel) {
  ForkRequest nul = small_request();
  nul.argv[1] = "--ra\0nk"s;
  EXPECT_THROW(
      {
        try {
          encode_fork_request(nul);
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("argument '--ra' holds a NUL byte"));
          throw;
        }
      },
      Error);
  ForkRequest no_value = small_request();
  no_value.env.push_back("JUSTANAME");
  EXPECT_THROW(encode_fork_request(no_value), Error);
  ForkRequest no_argv = small_request();
  no_argv.argv.clear();
  EXPECT_THROW(encode_fork_request(no_argv), Error);
  ForkRequest many = small_request();
  for (int fd = 0; fd < 20; ++fd) many.fds.emplace_back(fd, 100 + fd);
  EXPECT_THROW(encode_fork_request(many), Error);
}

TEST(ForkReply, IsAPidOrAnError) {
  EXPECT_EQ(decode_fork_reply("pid\0"
                              "4242\0"s)
                .pid,
            4242);
  const ForkReply e = decode_fork_reply("error\0the template runs 2 threads\0"s);
  EXPECT_EQ(e.pid, 0);
  EXPECT_EQ(e.error, "the template runs 2 threads");
  EXPECT_FALSE(decode_fork_reply("error\0\0"s).error.empty());
}

TEST(ForkReply, MalformedOnesAreProtocolErrorsSayingWhy) {
  const auto why = [](const std::string& payload) {
    try {
      decode_fork_reply(payload);
    } catch (const ProtocolError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(why("pid\0"
                  "12"s),
              HasSubstr("does not end its last field with a NUL"));
  EXPECT_THAT(why(""), HasSubstr("does not end its last field with a NUL"));
  EXPECT_THAT(why("pid\0x1\0"s), HasSubstr("names pid 'x1', which is no process id"));
  EXPECT_THAT(why("pid\0-3\0"s), HasSubstr("which is no process id"));
  EXPECT_THAT(why("pid\0"
                  "0\0"s),
              HasSubstr("which is no process id"));
  EXPECT_THAT(why("pid\0"
                  "1\0"
                  "2\0"s),
              HasSubstr("neither"));
  EXPECT_THAT(why("hello\0"s), HasSubstr("neither"));
}

}  // namespace
}  // namespace cprr

// TCP endpoints: parsing HOST:PORT (bracketed IPv6 too), listening on any port, connecting, and
// errors that name the address.
#include "recorder/launch/tcp.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "runtime/error.h"

namespace cprr {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(Endpoint, ParsesHostPortHostAloneAndBracketedV6) {
  const Endpoint a = parse_endpoint("node-7:29500", "--listen");
  EXPECT_EQ(a.host, "node-7");
  EXPECT_EQ(a.port, 29500);
  const Endpoint b = parse_endpoint("10.0.0.1", "--listen");
  EXPECT_EQ(b.host, "10.0.0.1");
  EXPECT_EQ(b.port, 0);
  const Endpoint c = parse_endpoint("[::1]:80", "--listen");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 80);
  EXPECT_EQ(c.str(), "[::1]:80");
  EXPECT_EQ(a.str(), "node-7:29500");
}

TEST(Endpoint, RefusesBadPortsAndUnbracketedV6NamingTheOption) {
  for (const char* bad : {"h:", "h:65536", "h:12x", "::1", "[::1", "[::1]x", "h :1"}) {
    try {
      parse_endpoint(bad, "--listen");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--listen"), std::string::npos) << e.what();
    }
  }
}

TEST(Endpoint, ListenOnAnyPortThenConnect) {
  UniqueFd l = listen_tcp(Endpoint{"127.0.0.1", 0});
  const Endpoint bound = local_endpoint(l.get());
  EXPECT_EQ(bound.host, "127.0.0.1");
  EXPECT_GT(bound.port, 0);
  UniqueFd c = connect_tcp(bound, milliseconds(2000));
  EXPECT_GE(c.get(), 0);
}

TEST(Endpoint, ConnectToNothingFailsNamingTheAddress) {
  UniqueFd l = listen_tcp(Endpoint{"127.0.0.1", 0});
  const Endpoint bound = local_endpoint(l.get());
  l.reset();  // nobody listens there now
  try {
    connect_tcp(bound, milliseconds(300));
    ADD_FAILURE() << "connected to a closed port";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bound.str()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cprr

// MASTER_PORT claims (recorder/launch/port_claim.h): a claimed port is no other claim's, in this
// process or another, until its holder lets go or dies; a port something outside cprr is bound to
// is passed over; the caller's base is read from the environment, and a bad one named.
#include "recorder/launch/port_claim.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "recorder/launch/tcp.h"
#include "runtime/error.h"
#include "tests/recorder/scoped_env.h"

namespace cprr {
namespace {

using test::ScopedEnv;

// A base no other test on this host is likely to use at the same time: a port the kernel just
// handed out as free, let go again.
int some_free_port() {
  const UniqueFd fd = listen_tcp(Endpoint{"127.0.0.1", 0});
  return local_endpoint(fd.get()).port;
}

TEST(PortClaim, AClaimedPortIsNoOtherClaimsUntilItIsLetGo) {
  const int base = some_free_port();
  std::optional<PortClaim> first = PortClaim::first_free(base);
  EXPECT_EQ(first->port(), base);
  const PortClaim second = PortClaim::first_free(base);
  EXPECT_GT(second.port(), base) << "a held claim was handed out again";
  const std::vector<PortClaim> jobs = claim_ports(3, base);
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_NE(jobs[0].port(), jobs[1].port());
  EXPECT_NE(jobs[1].port(), jobs[2].port());
  for (const PortClaim& c : jobs) {
    EXPECT_NE(c.port(), base);
    EXPECT_NE(c.port(), second.port());
  }
  first.reset();
  EXPECT_EQ(PortClaim::first_free(base).port(), base) << "a released claim stays taken";
}

TEST(PortClaim, AnotherProcesssClaimHoldsUntilThatProcessDies) {
  const int base = some_free_port();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds a claim on `base` until killed, as a cprecord mid-run would
    const PortClaim held = PortClaim::first_free(base);
    const char ok = held.port() == base ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(ok, 'y');
  EXPECT_NE(PortClaim::first_free(base).port(), base) << "the other process's claim was ignored";
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(PortClaim::first_free(base).port(), base) << "a killed holder left its claim behind";
}

TEST(PortClaim, APortSomethingElseListensOnIsPassedOverAndAFreePreferredOneTaken) {
  const UniqueFd busy = listen_tcp(Endpoint{"0.0.0.0", 0});
  const int taken = local_endpoint(busy.get()).port;
  EXPECT_NE(PortClaim::first_free(taken).port(), taken);
  const int preferred = some_free_port();
  EXPECT_EQ(PortClaim::first_free(taken, {0, taken, preferred}).port(), preferred)
      << "0 and the busy port are skipped, the free preferred one is taken before the base";
}

// TCPStore listens on IPv6 first: a port held by an IPv6-only listener is not free either.
TEST(PortClaim, APortAnIpv6OnlyListenerHoldsIsPassedOver) {
  UniqueFd v6(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!v6) GTEST_SKIP() << "no IPv6 on this host";
  const int on = 1;
  ASSERT_EQ(::setsockopt(v6.get(), IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on), 0);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_any;
  if (::bind(v6.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0)
    GTEST_SKIP() << "IPv6 is configured off: " << std::strerror(errno);
  ASSERT_EQ(::listen(v6.get(), 1), 0);
  sockaddr_in6 bound{};
  socklen_t len = sizeof bound;
  ASSERT_EQ(::getsockname(v6.get(), reinterpret_cast<sockaddr*>(&bound), &len), 0);
  const int taken = ntohs(bound.sin6_port);
  EXPECT_NE(PortClaim::first_free(taken).port(), taken);
}

TEST(PortClaim, TheBaseIsTheCallersOrTorchrunsDefaultAndABadOneIsNamed) {
  // An empty variable counts as unset, as the shell's `VAR= cprecord` means it.
  {
    const ScopedEnv cprr("CPRR_MASTER_PORT", ""), torch("MASTER_PORT", "");
    EXPECT_EQ(master_port_base(), kDefaultMasterPort);
  }
  {
    const ScopedEnv cprr("CPRR_MASTER_PORT", ""), torch("MASTER_PORT", "31000");
    EXPECT_EQ(master_port_base(), 31000);
  }
  {
    const ScopedEnv cprr("CPRR_MASTER_PORT", "32000"), torch("MASTER_PORT", "31000");
    EXPECT_EQ(master_port_base(), 32000) << "cprr's own variable first";
  }
  for (const char* bad : {"abc", "0", "65536", "80x"}) {
    const ScopedEnv cprr("CPRR_MASTER_PORT", bad);
    try {
      master_port_base();
      ADD_FAILURE() << bad << " was taken as a port";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("CPRR_MASTER_PORT='") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace cprr

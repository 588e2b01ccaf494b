// The launchers' command lines: mpirun's and srun's argv for a world, which never carries the token
// or a shell, whether a world's ranks are all local, and where a world listens for them.
#include "recorder/engine/launcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "data/text_forms.h"
#include "recorder/engine/world.h"
#include "recorder/launch/tcp.h"
#include "recorder/launch/token.h"
#include "runtime/error.h"

namespace cprr {
namespace {

const std::vector<std::string> kRankArgv{"/opt/cprr/cpworker", "--connect", "h:1", "--world", "3"};

bool contains_sequence(const std::vector<std::string>& v, const std::vector<std::string>& seq) {
  return std::search(v.begin(), v.end(), seq.begin(), seq.end()) != v.end();
}

TEST(LauncherArgv, MpirunOnThisHostExportsTheTokenByNameAndOversubscribes) {
  LaunchOptions o;
  o.kind = LauncherKind::mpirun;
  const auto argv = launcher_argv(o, 4, kRankArgv);
  EXPECT_EQ(argv.front(), "mpirun");
  EXPECT_TRUE(contains_sequence(argv, {"-np", "4"}));
  EXPECT_TRUE(contains_sequence(argv, {"-x", "CPRR_TOKEN"}));
  EXPECT_TRUE(contains_sequence(argv, {"--oversubscribe"}));
  EXPECT_FALSE(contains_sequence(argv, {"--host"}));
  // The rank command comes last, whole.
  EXPECT_TRUE(std::equal(kRankArgv.rbegin(), kRankArgv.rend(), argv.rbegin()));
}

TEST(LauncherArgv, MpirunAcrossHostsWithRanksPerNodeAndExtraArgs) {
  LaunchOptions o;
  o.kind = LauncherKind::mpirun;
  o.program = "/usr/lib/openmpi/bin/mpirun";
  o.hosts = {"a", "b"};
  o.gpus_per_node = 8;
  o.extra = {"--mca", "btl_tcp_if_include", "eth0"};
  const auto argv = launcher_argv(o, 16, kRankArgv);
  EXPECT_EQ(argv.front(), o.program);
  EXPECT_TRUE(contains_sequence(argv, {"--host", "a,b"}));
  EXPECT_TRUE(contains_sequence(argv, {"--map-by", "ppr:8:node"}));
  EXPECT_FALSE(contains_sequence(argv, {"--oversubscribe"}));
  // Extra arguments go to the launcher, before the rank command.
  const auto mca = std::search(argv.begin(), argv.end(), o.extra.begin(), o.extra.end());
  const auto worker = std::find(argv.begin(), argv.end(), kRankArgv.front());
  ASSERT_NE(mca, argv.end());
  EXPECT_LT(mca, worker);
}

TEST(LauncherArgv, SrunTakesNodesPartitionAndGpusPerNode) {
  LaunchOptions o;
  o.kind = LauncherKind::srun;
  o.hosts = {"gpu01", "gpu02"};
  o.partition = "a100";
  o.gpus_per_node = 4;
  const auto argv = launcher_argv(o, 8, kRankArgv);
  EXPECT_EQ(argv.front(), "srun");
  for (const char* a :
       {"--ntasks=8", "--nodelist=gpu01,gpu02", "--partition=a100", "--ntasks-per-node=4",
        "--gpus-per-node=4", "--kill-on-bad-exit=0", "--export=ALL"}) {
    EXPECT_TRUE(contains_sequence(argv, {a})) << a;
  }
  EXPECT_TRUE(std::equal(kRankArgv.rbegin(), kRankArgv.rend(), argv.rbegin()));
}

TEST(LauncherArgv, NoArgumentEverCarriesTheTokenOrAShell) {
  const std::string token = make_token();
  for (LauncherKind k : {LauncherKind::mpirun, LauncherKind::srun}) {
    LaunchOptions o;
    o.kind = k;
    for (const std::string& a : launcher_argv(o, 2, kRankArgv)) {
      EXPECT_EQ(a.find(token), std::string::npos);
      EXPECT_NE(a, "sh");
      EXPECT_NE(a, "-c");
    }
  }
}

TEST(LauncherArgv, DescribeNamesTheLauncherAndItsOptions) {
  LaunchOptions o;
  EXPECT_EQ(describe(o), "local");
  o.kind = LauncherKind::srun;
  o.hosts = {"a", "b"};
  o.partition = "p";
  EXPECT_EQ(describe(o), "srun hosts=a,b partition=p");
  EXPECT_EQ(parse_launcher("mpirun"), LauncherKind::mpirun);
  EXPECT_FALSE(parse_launcher("torchrun").has_value());
}

TEST(LauncherArgv, RanksAreLocalOnlyForMpirunWithoutAnyHostOption) {
  LaunchOptions o;
  o.kind = LauncherKind::mpirun;
  EXPECT_TRUE(o.all_local());
  o.extra = {"--mca", "btl", "self"};
  EXPECT_TRUE(o.all_local());
  for (const char* host_option : {"--hostfile", "-hostfile", "--host", "-H", "--machinefile"}) {
    o.extra = {host_option, "x"};
    EXPECT_FALSE(o.all_local()) << host_option;
  }
  o.extra.clear();
  o.hosts = {"a"};
  EXPECT_FALSE(o.all_local());
  o.hosts.clear();
  o.kind = LauncherKind::srun;
  EXPECT_FALSE(o.all_local()) << "srun places ranks on the allocation's nodes";
  EXPECT_EQ(listen_endpoint(o).host, "0.0.0.0");
  o.kind = LauncherKind::mpirun;
  EXPECT_EQ(listen_endpoint(o).host, "127.0.0.1");
  o.listen = "10.1.2.3:29500";
  EXPECT_EQ(listen_endpoint(o).port, 29500);
  EXPECT_EQ(advertised_host(o, Endpoint{"10.1.2.3", 29500}), "10.1.2.3");
  o.advertise = "head";
  EXPECT_EQ(advertised_host(o, Endpoint{"0.0.0.0", 1}), "head");
}

}  // namespace
}  // namespace cprr

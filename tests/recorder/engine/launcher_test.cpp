// The launchers' command lines: mpirun's and srun's argv for the run's node agents, which never
// carries the token or a shell; how many agents a run starts and where a world's ranks go among
// them; whether every rank is local, and where the controller listens for them.
#include "recorder/engine/launcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "data/text_forms.h"
#include "recorder/engine/node_agents.h"
#include "recorder/launch/tcp.h"
#include "recorder/launch/token.h"
#include "runtime/error.h"

namespace cprr {
namespace {

const std::vector<std::string> kAgentArgv{"/opt/cprr/cpworker", "--agent", "h:1", "--nodes", "2"};

bool contains_sequence(const std::vector<std::string>& v, const std::vector<std::string>& seq) {
  return std::search(v.begin(), v.end(), seq.begin(), seq.end()) != v.end();
}

TEST(LauncherArgv, MpirunOnThisHostStartsOneAgentExportsTheTokenByNameAndOversubscribes) {
  LaunchOptions o;
  o.kind = LauncherKind::mpirun;
  ASSERT_EQ(agent_nodes(o, std::nullopt), 1);
  const auto argv = agents_launcher_argv(o, 1, kAgentArgv);
  EXPECT_EQ(argv.front(), "mpirun");
  EXPECT_TRUE(contains_sequence(argv, {"-np", "1"}));
  EXPECT_TRUE(contains_sequence(argv, {"-x", "CPRR_TOKEN"}));
  EXPECT_TRUE(contains_sequence(argv, {"--oversubscribe"}));
  EXPECT_FALSE(contains_sequence(argv, {"--host"}));
  // The agent command comes last, whole.
  EXPECT_TRUE(std::equal(kAgentArgv.rbegin(), kAgentArgv.rend(), argv.rbegin()));
}

TEST(LauncherArgv, MpirunAcrossHostsPlacesOneAgentPerHostBeforeExtraArgs) {
  LaunchOptions o;
  o.kind = LauncherKind::mpirun;
  o.program = "/usr/lib/openmpi/bin/mpirun";
  o.hosts = {"a", "b"};
  o.gpus_per_node = 8;
  o.extra = {"--mca", "btl_tcp_if_include", "eth0"};
  ASSERT_EQ(agent_nodes(o, 7), 2) << "the hosts named, whatever an allocation says";
  const auto argv = agents_launcher_argv(o, 2, kAgentArgv);
  EXPECT_EQ(argv.front(), o.program);
  EXPECT_TRUE(contains_sequence(argv, {"-np", "2"}));
  EXPECT_TRUE(contains_sequence(argv, {"--host", "a,b"}));
  EXPECT_TRUE(contains_sequence(argv, {"--map-by", "ppr:1:node"}));
  EXPECT_FALSE(contains_sequence(argv, {"--oversubscribe"}));
  // Extra arguments go to the launcher, before the agent command.
  const auto mca = std::search(argv.begin(), argv.end(), o.extra.begin(), o.extra.end());
  const auto agent = std::find(argv.begin(), argv.end(), kAgentArgv.front());
  ASSERT_NE(mca, argv.end());
  EXPECT_LT(mca, agent);
}

TEST(LauncherArgv, MpirunHostsOnlyInLauncherArgsCannotBeCountedAndSaySo) {
  LaunchOptions o;
  o.kind = LauncherKind::mpirun;
  o.extra = {"--hostfile", "nodes.txt"};
  try {
    agent_nodes(o, std::nullopt);
    FAIL() << "hosts hidden in --launcher-arg were counted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--hosts"), std::string::npos) << e.what();
  }
}

TEST(LauncherArgv, SrunStartsOneAgentPerNodeWithTheNodesGpus) {
  LaunchOptions o;
  o.kind = LauncherKind::srun;
  o.hosts = {"gpu01", "gpu02"};
  o.partition = "a100";
  o.gpus_per_node = 4;
  const auto argv = agents_launcher_argv(o, 2, kAgentArgv);
  EXPECT_EQ(argv.front(), "srun");
  for (const char* a :
       {"--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=gpu01,gpu02",
        "--partition=a100", "--gpus-per-node=4", "--kill-on-bad-exit=0", "--export=ALL"}) {
    EXPECT_TRUE(contains_sequence(argv, {a})) << a;
  }
  EXPECT_TRUE(std::equal(kAgentArgv.rbegin(), kAgentArgv.rend(), argv.rbegin()));
  // Without hosts: the allocation's nodes when srun runs inside one, else one node.
  o.hosts.clear();
  EXPECT_EQ(agent_nodes(o, 3), 3);
  EXPECT_EQ(agent_nodes(o, std::nullopt), 1);
}

TEST(LauncherArgv, NoArgumentEverCarriesTheTokenOrAShell) {
  const std::string token = make_token();
  for (LauncherKind k : {LauncherKind::mpirun, LauncherKind::srun}) {
    LaunchOptions o;
    o.kind = k;
    for (const std::string& a : agents_launcher_argv(o, 2, kAgentArgv)) {
      EXPECT_EQ(a.find(token), std::string::npos);
      EXPECT_NE(a, "sh");
      EXPECT_NE(a, "-c");
    }
  }
}

TEST(RankPlacement, FillsNodeByNodeByGpusPerNodeElseEvenly) {
  EXPECT_EQ(place_ranks(4, 2, 2), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(place_ranks(3, 2, 0), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(place_ranks(2, 3, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(place_ranks(4, 1, 0), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(place_ranks(2, 2, 8), (std::vector<int>{0, 0})) << "one node holds it";
}

TEST(RankPlacement, AWorldTheNodesLeftCannotHoldIsNoNodeLeftSayingWhy) {
  try {
    place_ranks(8, 1, 4);
    FAIL() << "8 ranks of 4 per node placed on one node";
  } catch (const NoNodeLeft& e) {
    EXPECT_NE(std::string(e.what()).find("needs 2 nodes of 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(place_ranks(2, 0, 0), NoNodeLeft);
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

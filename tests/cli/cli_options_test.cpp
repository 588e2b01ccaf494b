// The options cprecord and cpreplay share (cli/cli_options.h): SharedOptions declared, checked and
// handed to a controller; the launcher options as the command line checks them: local by default,
// launcher options only with a launcher, and what does not fit refused naming the option.
#include "cli/cli_options.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "recorder/engine/controller.h"
#include "recorder/launch/interrupt.h"
#include "runtime/error.h"

namespace cprr {
namespace {

// ---- the shared options ----

// Parses `args` (without the program name) with the shared options declared as both verbs do.
SharedOptions parse_shared(std::vector<std::string> args) {
  CLI::App app;
  SharedOptions o;
  add_worker_option(app, o.worker, "(default: somewhere)");
  add_timeout_option(app, o.run.timeout_override_s);
  add_trace_option(app, o.trace, "DIR", "every execution");
  add_standby_option(app, o.run.standby, "fresh executions");
  add_collectives_option(app, o.run.collectives, "auto");
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse
  app.parse(args);
  return o;
}

std::string shared_usage_error(const SharedOptions& o) {
  try {
    check_shared(o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(SharedOptions, EachIsDeclaredOnceAndParsedIntoItsField) {
  const SharedOptions o = parse_shared({"--worker", "/w", "--timeout", "2.5", "--trace", "/t",
                                        "--standby", "3", "--collectives", "gloo"});
  EXPECT_EQ(o.worker, "/w");
  EXPECT_EQ(o.run.timeout_override_s, 2.5);
  EXPECT_EQ(o.trace, "/t");
  EXPECT_EQ(o.run.standby, 3);
  EXPECT_EQ(o.run.collectives, CollectivesRequest::gloo);
  EXPECT_EQ(parse_shared({"--collectives", "auto"}).run.collectives, CollectivesRequest::automatic);
  EXPECT_EQ(parse_shared({"--collectives", "nccl"}).run.collectives, CollectivesRequest::nccl);
  EXPECT_FALSE(parse_shared({}).run.collectives.has_value())
      << "unset stays unset (cpreplay: the record's)";
  for (const char* bad : {"0", "-1", "nan", "inf", "x"}) {
    EXPECT_THROW(parse_shared({"--timeout", bad}), CLI::ValidationError) << bad;
  }
  EXPECT_THROW(parse_shared({"--standby", "65"}), CLI::ValidationError);
  EXPECT_THROW(parse_shared({"--collectives", "mpi"}), CLI::ValidationError);
}

TEST(SharedOptions, InProcessCallersGetTheValidatorsWordsAsUsageErrors) {
  EXPECT_EQ(shared_usage_error(SharedOptions{}), "");
  SharedOptions o;
  o.run.timeout_override_s = std::nan("");
  EXPECT_NE(shared_usage_error(o).find("--timeout"), std::string::npos);
  o.run.timeout_override_s = 1e10;
  EXPECT_NE(shared_usage_error(o).find("--timeout"), std::string::npos);
  o.run.timeout_override_s = 5;
  o.run.standby = kMaxStandby + 1;
  EXPECT_NE(shared_usage_error(o).find("--standby"), std::string::npos);
  o.run.standby = 1;
  EXPECT_EQ(shared_usage_error(o), "");  // with a launcher too: its node agents start them
}

TEST(SharedOptions, ApplySetsWhatTheControllerTakesFromThem) {
  InterruptWatch watch;
  SharedOptions o;
  o.worker = "/not/copied";  // each verb resolves its own worker
  o.run.timeout_override_s = 7;
  o.trace = "/t";
  o.run.standby = 2;
  o.run.collectives = CollectivesRequest::nccl;
  o.run.fork_from_template = false;
  o.interrupt = &watch;
  ControllerConfig cc;
  cc.worker = "/resolved";
  apply_shared(o, cc);
  EXPECT_EQ(cc.worker, "/resolved");
  EXPECT_EQ(cc.run.timeout_override_s, 7.0);
  EXPECT_TRUE(cc.timeline) << "a trace times every op";
  EXPECT_EQ(cc.run.standby, 2);
  EXPECT_EQ(cc.run.collectives, CollectivesRequest::nccl);
  EXPECT_FALSE(cc.run.fork_from_template);
  EXPECT_EQ(cc.stop_fd, watch.fd());
  apply_shared(SharedOptions{}, cc);
  EXPECT_EQ(cc.stop_fd, -1) << "not interruptible";
  EXPECT_FALSE(cc.timeline);
  EXPECT_FALSE(cc.run.timeout_override_s.has_value());
}

// ---- the launcher options ----

LaunchOptions parse_launch(std::vector<std::string> args) {
  CLI::App app;
  LaunchFlags flags;
  add_launch_options(app, flags);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse
  app.parse(args);
  return finish_launch_options(flags);
}

std::string usage_error(std::vector<std::string> args) {
  try {
    parse_launch(std::move(args));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchFlags, LocalIsTheDefaultAndRefusesLauncherOptions) {
  EXPECT_EQ(parse_launch({}).kind, LauncherKind::local);
  EXPECT_NE(usage_error({"--hosts", "a,b"}).find("--hosts only means something with --launcher"),
            std::string::npos);
  EXPECT_NE(usage_error({"--listen", "0.0.0.0:1"}).find("--listen"), std::string::npos);
}

TEST(LaunchFlags, MpirunWithItsOptions) {
  const LaunchOptions o = parse_launch(
      {"--launcher", "mpirun", "--launcher-path", "/bin/true", "--hosts", "a,b", "--gpus-per-node",
       "2", "--launcher-arg=--mca", "--launcher-arg", "x", "--listen", "0.0.0.0:29500"});
  EXPECT_EQ(o.kind, LauncherKind::mpirun);
  EXPECT_EQ(o.hosts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.gpus_per_node, 2);
  EXPECT_EQ(o.extra, (std::vector<std::string>{"--mca", "x"}));
  EXPECT_EQ(o.listen, "0.0.0.0:29500");
}

TEST(LaunchFlags, RefusesWhatDoesNotFit) {
  EXPECT_NE(
      usage_error({"--launcher", "mpirun", "--launcher-path", "/bin/true", "--partition", "p"})
          .find("--partition is Slurm's"),
      std::string::npos);
  EXPECT_NE(usage_error({"--launcher", "srun", "--launcher-path", "/nonexistent/srun"})
                .find("--launcher-path /nonexistent/srun is not an executable file"),
            std::string::npos);
  EXPECT_NE(
      usage_error({"--launcher", "mpirun", "--launcher-path", "/bin/true", "--listen", "h:99999"})
          .find("--listen"),
      std::string::npos);
  EXPECT_NE(usage_error({"--launcher", "mpirun", "--launcher-path", "/bin/true", "--shared-dir",
                         "/nonexistent"})
                .find("--shared-dir /nonexistent is not a directory"),
            std::string::npos);
}

}  // namespace
}  // namespace cprr

#include "recorder/rank/worker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "data/flight_record.h"
#include "recorder/rank/agent.h"
#include "recorder/rank/case_runner.h"
#include "recorder/rank/descriptors.h"
#include "recorder/rank/rank_channel.h"
#include "runtime/env_number.h"
#include "runtime/error.h"

namespace cprr {
namespace {

struct WorkerArgs {
  int rank = 0;
  int world_size = 1;
  int control_fd = -1;
  std::string rendezvous;
  BackendKind backend = BackendKind::cpu;
  bool catalog = false;
  /// With --agent, after --: the worker the ranks run instead of this binary.
  std::vector<std::string> rank_command;
  std::string agent;  ///< HOST:PORT: run as a node agent (agent.h)
  int nodes = 0;      ///< with --agent: the run's node count
  int node = -1;      ///< with --agent: this node's index (-1: the launcher's rank)
  /// When main() began: the first step of start-up the rank reports is timed from here.
  PhaseClock::Clock::time_point started = PhaseClock::Clock::now();
};

void parse(int argc, char** argv, WorkerArgs& a) {
  CLI::App app{
      "cprr rank process, or a node agent (--agent); started by cprecord/cpreplay, directly or "
      "through a launcher, not by hand"};
  auto* rank = app.add_option("--rank", a.rank, "this rank");
  auto* size = app.add_option("--world-size", a.world_size, "ranks in the world");
  auto* fd = app.add_option("--control-fd", a.control_fd, "inherited control socket");
  auto* agent = app.add_option(
      "--agent", a.agent,
      "HOST:PORT of the controller: run as the node agent that starts and supervises every rank "
      "the controller places on this node, authenticated by the token in CPRR_TOKEN");
  auto* nodes = app.add_option("--nodes", a.nodes, "with --agent: the run's node count")
                    ->check(CLI::Range(1, 1 << 20));
  app.add_option("--node", a.node,
                 "with --agent: this node's index (default: from the launcher's environment)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--rendezvous", a.rendezvous, "communicator rendezvous directory");
  app.add_option_function<std::string>(
      "--backend",
      [&a](const std::string& word) {
        const std::optional<BackendKind> kind = parse_backend_kind(word);
        if (!kind) throw CLI::ValidationError("--backend", "'" + word + "' is not cpu or cuda");
        a.backend = *kind;
      },
      "cpu | cuda");
  app.add_flag("--catalog", a.catalog, "send the registered cases and exit");
  auto* command = app.add_option(
      "rank_command", a.rank_command,
      "with --agent, after --: the worker (and its arguments) the ranks run instead of this "
      "binary, as cprecord --python's launched ranks do");
  agent->excludes(fd)->excludes(size)->excludes(rank);
  nodes->needs(agent);
  try {
    app.parse(argc, argv);
    if (agent->count() > 0) {
      if (nodes->count() == 0) throw CLI::RequiredError("--nodes (with --agent)");
      return;
    }
    if (command->count() > 0) {
      throw CLI::ValidationError("rank_command", "a worker after -- needs --agent");
    }
    if (size->count() == 0) throw CLI::RequiredError("--world-size");
    if (fd->count() == 0) throw CLI::RequiredError("--control-fd or --agent");
    if (rank->count() == 0) throw CLI::RequiredError("--rank");
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
}

int run_node_agent(const WorkerArgs& a) {
  AgentArgs g;
  g.controller = parse_endpoint(a.agent, "--agent");
  g.nodes = a.nodes;
  if (a.node >= 0) g.node = a.node;
  g.rank_command = a.rank_command;
  return run_agent(g);
}

// Ranks must never outlive their controller: a killed cprecord takes its worlds with it. A rank
// forked by a template process (python/cprr/rank/template.py) gets here only once it has been
// reparented to its controller: set while its parent was the template's intermediate child, the
// signal would have fired when that child exited, a moment after the fork.
void die_with_parent() {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) std::_Exit(3);
}

// The descriptors shells and libraries take for their own (`exec 3>file`, fd 3 "assumed free"):
// the control channel never stays among them.
constexpr int kLowDescriptors = 10;
// The descriptor case code most often writes to, or dup2()s over, believing it free.
constexpr int kReservedFd = 3;

// Takes the control socket out of case code's reach: close-on-exec (posix_spawn's dup2 cleared
// the flag), so a child a case spawns does not inherit it, and moved up when a controller passed
// it at a low descriptor. Then fd 3 is held open on /dev/null (close-on-exec) for the rank's
// life, so no harness or library descriptor (a Gloo or NCCL socket) can land there: a case that
// writes to fd 3 writes to nothing, one that dup2()s over it closes nothing of ours.
UniqueFd adopt_control_fd(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0) throw_errno(__FILE__, __LINE__, fmt::format("--control-fd {}", fd));
  UniqueFd control(fd);
  if (fd < kLowDescriptors) {
    control.reset(CPRR_SYSCALL(::fcntl(fd, F_DUPFD_CLOEXEC, control_fd_slot())));
  } else {
    CPRR_SYSCALL(::fcntl(fd, F_SETFD, flags | FD_CLOEXEC));
  }
  if (::fcntl(kReservedFd, F_GETFD) < 0) {
    const int null = CPRR_SYSCALL(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (null != kReservedFd) {  // a lower descriptor was free too: leave it as it was
      CPRR_SYSCALL(::dup3(null, kReservedFd, O_CLOEXEC));
      ::close(null);
    }
  }
  return control;
}

// The descriptors open now (not counting the one that listed them).
RankState make_state(const WorkerArgs& a) {
  RankState state;
  state.rank = a.rank;
  state.world_size = a.world_size;
  // A launcher across hosts says which GPU of its node this rank takes, and how many ranks its
  // node holds (its node agent: agent.cpp).
  const auto local = [](const char* name, long long lo, std::string_view what) {
    return static_cast<int>(env_number(name, lo, INT_MAX - 1, what).value_or(-1));
  };
  state.backend = make_backend(BackendConfig{a.backend, a.rank, a.world_size, a.rendezvous,
                                             local("CPRR_LOCAL_RANK", 0, "a rank of its node"),
                                             local("CPRR_LOCAL_SIZE", 1, "a number of ranks")});
  if (!a.rendezvous.empty()) {
    state.flight = std::make_unique<FlightRecorder>(flight_record_path(a.rendezvous, a.rank));
  }
  const char* capture = std::getenv("CPRR_CAPTURE");
  state.capture = capture == nullptr || std::string_view(capture) != "off";
  for (MemPool pool : {MemPool::device, MemPool::symmetric, MemPool::host}) {
    state.engines[static_cast<int>(pool)] = std::make_unique<PlacementEngine>(
        state.backend->arena_capacity(pool), 256, Placement::best_fit);
  }
  return state;
}

Hello hello_of(const WorkerArgs& a, const Backend* backend = nullptr,
               std::vector<StartupPhase> phases = {}) {
  Hello h{a.rank, a.world_size, static_cast<int32_t>(::getpid()),
          std::string(backend_name(a.backend)), CPRR_VERSION};
  h.phases = std::move(phases);
  if (backend != nullptr) {
    h.device = backend->device_index();
    h.gpu = backend->device_identity();
  }
  return h;
}

// Exit status of a rank that the controller told to abort its hung case.
constexpr int kAbortedExit = 4;

int send_catalog(const WorkerArgs& a, UniqueFd control) {
  RankChannel channel{std::move(control)};
  Catalog cat;
  for (const auto& c : registry().cases()) cat.cases.push_back(c.info);
  cat.files = registry().source_files();
  channel.send_hello(hello_of(a));
  channel.send(FromRank{std::move(cat)});
  return 0;
}

/// The registry's connected hooks, once the world joined its communicator; each named step
/// timed as a start-up phase.
std::vector<StartupPhase> run_connected_hooks(const Registry& reg, Backend& backend) {
  const WorldJoined joined{backend.transport(), backend.device_index()};
  PhaseClock clock;
  for (const ConnectedHook& hook : reg.connected_hooks()) {
    std::string phase;
    try {
      phase = hook(joined);
    } catch (const std::exception& e) {
      CPRR_THROW("the set-up of its world's cases, once connected, failed: {}", e.what());
    }
    if (phase.empty()) {
      clock.restart();
    } else {
      clock.lap(phase);
    }
  }
  return clock.take();
}

int serve(const WorkerArgs& a, UniqueFd control) {
  PhaseClock clock(a.started);
  const Registry& reg = registry();
  for (Hook init : reg.worker_inits()) init();
  EnvironmentSnapshot env = EnvironmentSnapshot::capture();
  const InheritedDescriptors inherited = InheritedDescriptors::capture();
  clock.lap("rank set-up");
  RankState state = make_state(a);
  std::vector<StartupPhase> phases = clock.take();
  for (StartupPhase& p : state.backend->take_startup_phases()) phases.push_back(std::move(p));
  CaseRunner runner(state, reg, std::move(env));
  // Declared after the runner: the watchdog thread calls into it, so it must stop first.
  RankChannel channel{std::move(control)};
  Hello hello = hello_of(a, state.backend.get(), std::move(phases));
  hello.comm_id = state.backend->bootstrap_id();
  channel.send_hello(hello);
  Backend& backend = *state.backend;
  channel.start(RankChannel::Watchdog{[&runner] { return runner.status(); },
                                      [&backend] {
                                        backend.abort();
                                        std::fflush(nullptr);
                                        std::_Exit(kAbortedExit);
                                      }});
  for (;;) {
    ToRank msg = channel.next();
    if (std::holds_alternative<Shutdown>(msg)) {
      if (backend.teardown_left_to_exit()) {
        // Read between cases only (the controller ending the world, or the channel closed by
        // a controller that is gone; a hung rank gets Abort from the watchdog thread): nothing
        // runs, and only stdio is left to flush. Exit hooks and static destructors do not run
        // either: a worker's cases must not need them (recorder/api/case.h).
        backend.settle_before_exit();
        std::fflush(nullptr);
        std::cout.flush();
        std::_Exit(0);
      }
      return 0;
    }
    if (const auto* boot = std::get_if<Bootstrap>(&msg)) {
      std::vector<StartupPhase> connected;
      try {
        backend.connect(ConnectSpec{boot->comm_id, boot->transport});
        connected = run_connected_hooks(reg, backend);
      } catch (const std::exception& e) {
        channel.send(FromRank{Connected{e.what()}});  // the controller reports it as start-up
        return 2;
      }
      inherited.close_on_exec_rest();
      std::vector<StartupPhase> joined = backend.take_startup_phases();
      for (StartupPhase& p : connected) joined.push_back(std::move(p));
      channel.send(FromRank{Connected{{}, backend.symmetric_pool(), std::move(joined)}});
    }
    if (const auto* run = std::get_if<RunCase>(&msg)) {
      CaseDone done = runner.run(*run);
      done.first_use = backend.take_first_use_phases();
      done.symmetric_pool = backend.symmetric_pool();
      done.distrusted = std::exchange(state.distrusted, {});
      // NCCL opens sockets lazily, at the collective that first needs a connection.
      inherited.close_on_exec_rest();
      // Buffered stdio output belongs to this case: flush it before reporting, so the
      // controller's drain after the report attributes it here and not to the next case.
      std::fflush(nullptr);
      std::cout.flush();
      channel.send(FromRank{std::move(done)});
    }
  }
}

}  // namespace

int worker_main(int argc, char** argv) {
  WorkerArgs a;
  parse(argc, argv, a);
  ::signal(SIGPIPE, SIG_IGN);
  die_with_parent();
  try {
    if (!registry().errors().empty()) {
      for (const auto& e : registry().errors()) std::fprintf(stderr, "cpworker: %s\n", e.c_str());
      return 2;
    }
    if (!a.agent.empty()) return run_node_agent(a);
    UniqueFd control = adopt_control_fd(a.control_fd);
    return a.catalog ? send_catalog(a, std::move(control)) : serve(a, std::move(control));
  } catch (const std::exception& e) {
    if (!a.agent.empty()) {
      std::fprintf(stderr, "cpworker agent: %s\n", e.what());
    } else {
      std::fprintf(stderr, "cpworker rank %d: %s\n", a.rank, e.what());
    }
    return 2;
  }
}

}  // namespace cprr

#include "recorder/worker.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "recorder/case_runner.h"
#include "recorder/rank_channel.h"

namespace cprr {
namespace {

struct WorkerArgs {
  int rank = 0;
  int world_size = 1;
  int control_fd = -1;
  std::string rendezvous;
  std::string backend = "cpu";
  bool catalog = false;
};

void parse(int argc, char** argv, WorkerArgs& a) {
  CLI::App app{"cprr rank process; started by cprecord/cpreplay, not by hand"};
  app.add_option("--rank", a.rank, "this rank")->required();
  app.add_option("--world-size", a.world_size, "ranks in the world")->required();
  app.add_option("--control-fd", a.control_fd, "inherited control socket")->required();
  app.add_option("--rendezvous", a.rendezvous, "communicator rendezvous directory");
  app.add_option("--backend", a.backend, "cpu | cuda");
  app.add_flag("--catalog", a.catalog, "send the registered cases and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
}

// Ranks must never outlive their controller: a killed cprecord takes its worlds with it.
void die_with_parent() {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) std::_Exit(3);
}

RankState make_state(const WorkerArgs& a) {
  RankState state;
  state.rank = a.rank;
  state.world_size = a.world_size;
  state.backend = make_backend(BackendConfig{a.backend, a.rank, a.world_size, a.rendezvous});
  const char* capture = std::getenv("CPRR_CAPTURE");
  state.capture = capture == nullptr || std::string_view(capture) != "off";
  for (MemPool pool : {MemPool::device, MemPool::symmetric, MemPool::host}) {
    state.engines[static_cast<int>(pool)] = std::make_unique<PlacementEngine>(
        state.backend->arena_capacity(pool), 256, Placement::best_fit);
  }
  return state;
}

Hello hello_of(const WorkerArgs& a, std::string comm_id = {}) {
  return Hello{a.rank,    a.world_size, static_cast<int32_t>(::getpid()),
               a.backend, CPRR_VERSION, std::move(comm_id)};
}

// Exit status of a rank that the controller told to abort its hung case.
constexpr int kAbortedExit = 4;

int send_catalog(const WorkerArgs& a) {
  RankChannel channel{UniqueFd(a.control_fd)};
  Catalog cat;
  for (const auto& c : registry().cases()) cat.cases.push_back(c.info);
  channel.send_hello(hello_of(a));
  channel.send(FromRank{std::move(cat)});
  return 0;
}

int serve(const WorkerArgs& a) {
  const Registry& reg = registry();
  for (Hook init : reg.worker_inits()) init();
  EnvironmentSnapshot env = EnvironmentSnapshot::capture();
  RankState state = make_state(a);
  CaseRunner runner(state, reg, std::move(env));
  // Declared after the runner: the watchdog thread calls into it, so it must stop first.
  RankChannel channel{UniqueFd(a.control_fd)};
  channel.send_hello(hello_of(a, state.backend->bootstrap_id()));
  Backend& backend = *state.backend;
  channel.start(RankChannel::Watchdog{[&runner] { return runner.status(); },
                                      [&backend] {
                                        backend.abort();
                                        std::fflush(nullptr);
                                        std::_Exit(kAbortedExit);
                                      }});
  for (;;) {
    ToRank msg = channel.next();
    if (std::holds_alternative<Shutdown>(msg)) return 0;
    if (const auto* boot = std::get_if<Bootstrap>(&msg)) {
      try {
        backend.connect(boot->comm_id);
      } catch (const std::exception& e) {
        channel.send(FromRank{Connected{e.what()}});  // the controller reports it as start-up
        return 2;
      }
      channel.send(FromRank{Connected{}});
    }
    if (const auto* run = std::get_if<RunCase>(&msg)) {
      CaseDone done = runner.run(*run);
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
    return a.catalog ? send_catalog(a) : serve(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpworker rank %d: %s\n", a.rank, e.what());
    return 2;
  }
}

}  // namespace cprr

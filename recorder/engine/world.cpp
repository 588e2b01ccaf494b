// World, first half: spawning a world's ranks (or having a launcher or template start them),
// waiting for them to connect, and ending the world. Running executions is world_collect.cpp.
#include "recorder/engine/world.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <set>

#include "data/flight_record.h"
#include "data/text_forms.h"
#include "recorder/engine/world_startup.h"
#include "recorder/launch/proc_tree.h"
#include "recorder/launch/token.h"
#include "recorder/launch/wait_text.h"
#include "runtime/error.h"
#include "runtime/transport_choice.h"

namespace cprr {
namespace {

constexpr std::string_view kWorldDirPrefix = "cprr-world-";
// The owner's pid in a per-world directory's name ("cprr-world-<pid>-XXXXXX"), or 0 when the name
// is not one of ours (older names without a pid included: their owner cannot be told).
pid_t owner_of(const std::string& name) {
  if (!name.starts_with(kWorldDirPrefix)) return 0;
  const std::string rest = name.substr(kWorldDirPrefix.size());
  const auto dash = rest.find('-');
  if (dash == 0 || dash == std::string::npos || dash > 9) return 0;
  for (std::size_t k = 0; k < dash; ++k) {
    if (rest[k] < '0' || rest[k] > '9') return 0;
  }
  return static_cast<pid_t>(std::stol(rest.substr(0, dash)));
}

// In --shared-dir when given (ranks on other hosts must see it), else the temp directory.
std::string make_rendezvous_dir(const std::string& shared_dir) {
  const std::filesystem::path tmp = shared_dir.empty() ? std::filesystem::temp_directory_path()
                                                       : std::filesystem::path(shared_dir);
  // The pid names the owner, so a later recorder can tell litter (owner gone) from a live world.
  std::string tmpl = (tmp / fmt::format("{}{}-XXXXXX", kWorldDirPrefix, ::getpid())).string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw_errno(__FILE__, __LINE__, "mkdtemp(" + tmpl + ")");
  return tmpl;
}

// What rank r starts with on top of the controller's environment, local or launched.
std::vector<std::pair<std::string, std::string>> rank_env(const WorldConfig& config, int r) {
  std::vector<std::pair<std::string, std::string>> env = world_env(config);
  env.emplace_back("CPRR_RANK", std::to_string(r));
  env.emplace_back("CPRR_WORLD_SIZE", std::to_string(config.world_size));
  return env;
}

// A child's stdin (/dev/null), stdout and stderr (pipes whose read ends the world drains).
struct ChildStdio {
  UniqueFd devnull, out_r, out_w, err_r, err_w;
};

ChildStdio child_stdio() {
  ChildStdio io;
  int out[2], err[2];
  CPRR_SYSCALL(::pipe2(out, O_CLOEXEC));
  io.out_r.reset(out[0]);
  io.out_w.reset(out[1]);
  CPRR_SYSCALL(::pipe2(err, O_CLOEXEC));
  io.err_r.reset(err[0]);
  io.err_w.reset(err[1]);
  io.devnull.reset(CPRR_SYSCALL(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  return io;
}

}  // namespace

// NVLink multicast stays off in every rank, whatever the caller's or a recorded environment says
// (it is unsafe on the shared GPU machines, ../shared/design/DEVICE.md).
std::vector<std::pair<std::string, std::string>> world_env(const WorldConfig& config) {
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& kv : config.env) {
    if (kv.first != "NCCL_NVLS_ENABLE") env.push_back(kv);
  }
  env.emplace_back("NCCL_NVLS_ENABLE", "0");
  return env;
}

int remove_stale_world_dirs(const std::filesystem::path& dir) {
  int removed = 0;
  std::error_code ec;
  // Errors are skipped, not thrown: another recorder may be sweeping the same directory.
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t owner = owner_of(it->path().filename().string());
    // Only our own user's litter: root must not sweep other users' directories, and a recorder
    // in another pid namespace sharing /tmp is usually another user too.
    struct stat st {};
    if (owner <= 0 || ::lstat(it->path().c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    // EPERM means the owner lives (another user's process): only ESRCH proves it is gone.
    if (owner <= 0 || ::kill(owner, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    if (std::filesystem::remove_all(it->path(), rm) > 0 && !rm) ++removed;
  }
  return removed;
}

World::World(const WorldConfig& config, uint64_t id, RankSpawner& spawner, RankListener* listener,
             NodeAgents* agents)
    : id_(id),
      rendezvous_(make_rendezvous_dir(config.launch.shared_dir)),
      stop_fd_(config.stop_fd),
      agents_(agents),
      logs_(config.log_tail_bytes) {
  const Clock::time_point begin = Clock::now();
  try {
    if (config.launch.over_tcp()) {
      CPRR_CHECK(listener != nullptr && agents_ != nullptr,
                 "world {}: launcher {} needs a rank listener and node agents", id,
                 describe(config.launch));
      start_from_agents(config, *listener);
    } else {
      // What a rank leaves when it ends is reparented here, not to init: end_leftovers finds it.
      become_subreaper();
      for (int r = 0; r < config.world_size; ++r) spawn_rank(r, config, spawner);
    }
    logs_.start();
    await_ready(config, begin);
    for (Rank& r : ranks_) {
      if (const pid_t pid = r.process->local_pid(); pid > 0) r.started_with = descendants(pid);
    }
  } catch (...) {
    kill(std::chrono::milliseconds(100));
    std::error_code ec;
    std::filesystem::remove_all(rendezvous_, ec);
    throw;
  }
  startup_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
}

std::unique_ptr<WorldHandle> ProcessWorlds::make(const WorldConfig& config, uint64_t id) {
  std::unique_lock lock(mu_);
  if (!swept_) {
    remove_stale_world_dirs(config.launch.shared_dir.empty()
                                ? std::filesystem::temp_directory_path()
                                : std::filesystem::path(config.launch.shared_dir));
    swept_ = true;
  }
  RankSpawner& spawner = spawner_for(config);
  lock.unlock();  // worlds start in parallel; the listener is used by one start at a time
  const auto [listener, agents] = nodes_->for_world(config);
  return std::make_unique<World>(config, id, spawner, listener, agents);
}

std::pair<RankListener*, NodeAgents*> LaunchedNodes::for_world(const WorldConfig& config) {
  if (!config.launch.over_tcp()) return {nullptr, nullptr};
  std::lock_guard lock(mu_);
  if (!listener_) {
    // One listener and one token for the whole run: every agent and rank connects to it.
    listener_ = std::make_unique<RankListener>(
        listen_endpoint(config.launch), make_token(),
        [](const std::string& line) { fmt::print(stderr, "cprr: {}\n", line); });
  }
  // A C++ worker binary is its own agent; a worker with arguments (the Python one) runs under
  // the agent binary (cpworker), as its local ranks run from a template.
  const bool own_agent = config.worker_args.empty();
  CPRR_CHECK(own_agent || !config.agent_binary.empty(),
             "--launcher {} needs the agent binary (cpworker) for the worker {}",
             launcher_name(config.launch.kind), config.worker);
  NodeAgents::Config c;
  c.launch = config.launch;
  c.program = own_agent ? config.worker : config.agent_binary;
  if (!own_agent) {
    c.rank_command = {config.worker};
    c.rank_command.insert(c.rank_command.end(), config.worker_args.begin(),
                          config.worker_args.end());
  }
  std::vector<std::string> key{c.program};
  key.insert(key.end(), c.rank_command.begin(), c.rank_command.end());
  std::unique_ptr<NodeAgents>& agents = agents_[key];
  if (!agents) {
    c.template_env = world_env(config);
    c.startup_timeout = config.startup_timeout;
    c.stop_fd = config.stop_fd;
    agents = std::make_unique<NodeAgents>(c, *listener_);  // a failure: the next world retries
  }
  return {listener_.get(), agents.get()};
}

RankSpawner& ProcessWorlds::spawner_for(const WorldConfig& config) {
  // A launcher's ranks start on their hosts, from their agents' templates: none here.
  if (config.worker_args.empty() || !config.run.fork_from_template || config.launch.over_tcp()) {
    return direct_;
  }
  TemplateCommand command{config.worker, config.worker_args, world_env(config)};
  std::unique_ptr<TemplateSpawner>& spawner = templates_[command];
  if (!spawner) spawner = std::make_unique<TemplateSpawner>(std::move(command));
  return *spawner;
}

void World::spawn_rank(int r, const WorldConfig& config, RankSpawner& spawner) {
  int sv[2];
  CPRR_SYSCALL(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
  UniqueFd parent(sv[0]), child(sv[1]);
  ChildStdio io = child_stdio();

  // A high descriptor, not fd 3: case code (or a library it calls) that writes to a low descriptor
  // it assumes free must never reach the protocol. The rank makes it close-on-exec at once.
  const int slot = control_fd_slot();
  SpawnSpec spec;
  spec.argv = {config.worker};
  spec.argv.insert(spec.argv.end(), config.worker_args.begin(), config.worker_args.end());
  for (std::string& arg :
       rank_arguments(r, config.world_size, slot, rendezvous_, backend_name(config.backend))) {
    spec.argv.push_back(std::move(arg));
  }
  spec.fds = {{io.devnull.get(), 0}, {io.out_w.get(), 1}, {io.err_w.get(), 2}, {child.get(), slot}};
  spec.process_group = group_;
  spec.env = rank_env(config, r);

  Rank rank;
  // Marked before the spawn: the rank's own steps (its Hello) start after this and never before,
  // however late a loaded box hands control back to this thread after the fork.
  rank.spawned_at = Clock::now();
  ChildProcess process;
  try {
    process = spawner.start(spec, SpawnLimits{Clock::now() + config.startup_timeout, stop_fd_});
  } catch (const Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    CPRR_THROW("world {} (size {}): rank {} could not be started: {}", id_, config.world_size, r,
               e.what());
  }
  if (r == 0) group_ = process.pid();
  rank.process = std::make_unique<LocalRank>(std::move(process), group_);
  CPRR_SYSCALL(::fcntl(parent.get(), F_SETFL, O_NONBLOCK));
  rank.control = std::move(parent);
  logs_.add(std::move(io.out_r));
  logs_.add(std::move(io.err_r));
  ranks_.push_back(std::move(rank));
}

void World::start_from_agents(const WorldConfig& config, RankListener& listener) {
  std::vector<AcceptedRank> accepted;
  Clock::time_point asked{};  // StartRank sent: no rank of this world starts before it
  {
    std::lock_guard starting(agents_->starting());
    asked = Clock::now();
    nodes_ = agents_->start_world(id_, config.world_size, rendezvous_, config.backend,
                                  config.run.fork_from_template && !config.worker_args.empty(),
                                  world_env(config));
    try {
      accepted = listener.accept_world(
          id_, config.world_size, Clock::now() + config.startup_timeout,
          [&](int r) { return rank_env(config, r); },
          [&] {
            if (stop_requested()) {
              CPRR_THROW_AS(Interrupted, "interrupted while world {} (size {}) was starting", id_,
                            config.world_size);  // no rank connected yet: size() is still 0
            }
            agents_->check_start(id_, nodes_);
          });
    } catch (const Interrupted&) {
      throw;
    } catch (const std::exception& e) {
      CPRR_THROW("world {} (size {}) failed to start: {}; the launcher's output:\n{}", id_,
                 config.world_size, e.what(), agents_->launcher_output());
    }
  }
  for (int r = 0; r < config.world_size; ++r) {
    AcceptedRank& a = accepted[r];
    Rank rank;
    rank.process = std::make_unique<RemoteRank>(std::move(a.supervisor), agents_->name(nodes_[r]));
    rank.control = std::move(a.control);
    rank.spawned_at = asked;
    logs_.add(std::move(a.out));
    logs_.add(std::move(a.err));
    ranks_.push_back(std::move(rank));
  }
}

std::string World::infrastructure_fault() {
  if (agents_ == nullptr) return {};
  for (const int n : std::set<int>(nodes_.begin(), nodes_.end())) {
    if (std::string why = agents_->gone(n); !why.empty()) {
      return fmt::format("{} {}", agents_->name(n), why);
    }
  }
  return {};
}

void World::await_ready(const WorldConfig& config, Clock::time_point begin) {
  const auto deadline = Clock::now() + config.startup_timeout;
  const auto limit = fmt::format("within {} ms", config.startup_timeout.count());
  std::string comm_id;
  std::vector<RankDevice> devices(ranks_.size());
  std::vector<RankStart> starts(ranks_.size());
  for (std::size_t r = 0; r < ranks_.size(); ++r) starts[r].spawned_at = ranks_[r].spawned_at;
  await_each(deadline, "no hello " + limit, [&](int r, const std::string& frame) {
    Hello hello = decode_hello(frame);
    CPRR_CHECK(hello.rank == r && hello.world_size == size(),
               "rank {} introduced itself as rank {} of {}", r, hello.rank, hello.world_size);
    if (r == 0) comm_id = hello.comm_id;
    devices[r] = RankDevice{hello.device, hello.gpu};
    starts[r].hello_at = Clock::now();
    starts[r].before_hello = std::move(hello.phases);
  });
  // Every rank joins the communicator with rank 0's id (NCCL) and says when it has; ranks that
  // rendezvous by themselves (Gloo) answer at once.
  const TransportChoice choice = choose_transport(config.backend, config.run.requested(), devices);
  transport_ = choice.transport;
  rank_gpus_ = choice.rank_gpus;
  if (choice.transport == CollectiveTransport::nccl && comm_id.empty()) {
    CPRR_THROW("{}", startup_failure(0,
                                     "it sent no NCCL id, and every rank has a GPU of its own "
                                     "(a launcher that sets no local rank?)"));
  }
  const std::string boot = encode(ToRank{Bootstrap{comm_id, transport_}});
  std::vector<std::string> pools(ranks_.size());
  for (Rank& r : ranks_) write_frame(r.control.get(), boot);
  await_each(deadline, "it did not join the communicator " + limit,
             [&](int r, const std::string& frame) {
               const FromRank msg = decode_from_rank(frame);
               const auto* c = std::get_if<Connected>(&msg);
               if (c == nullptr) {
                 CPRR_THROW("{}", startup_failure(r, "it answered Bootstrap with another message"));
               }
               if (!c->error.empty()) {
                 CPRR_THROW("{}", startup_failure(r, "it could not connect: " + c->error));
               }
               pools[r] = c->symmetric_pool;
               starts[r].connected_at = Clock::now();
               starts[r].connecting = c->phases;
             });
  symmetric_pool_ = summarize_pools(pools);
  startup_phases_ = world_startup_phases(begin, Clock::now(), starts);
}

void World::await_each(Clock::time_point deadline, const std::string& timeout_why,
                       const std::function<void(int, const std::string&)>& on_frame) {
  std::vector<bool> answered(ranks_.size(), false);
  for (std::size_t have = 0; have < ranks_.size();) {
    std::vector<pollfd> fds;
    std::vector<int> idx;
    for (int r = 0; r < size(); ++r) {
      if (answered[r]) continue;
      if (auto frame = ranks_[r].reader.next()) {  // already buffered by an earlier read
        on_frame(r, *frame);
        answered[r] = true;
        ++have;
        continue;
      }
      fds.push_back(pollfd{ranks_[r].control.get(), POLLIN, 0});
      idx.push_back(r);
    }
    if (fds.empty()) continue;
    if (stop_fd_ >= 0) fds.push_back(pollfd{stop_fd_, POLLIN, 0});  // last: no rank index
    const int timeout = ms_until(deadline);
    if (timeout == 0 || ::poll(fds.data(), fds.size(), timeout) == 0) {
      CPRR_THROW("{}", startup_failure(idx.front(), timeout_why));
    }
    if (stop_requested()) {
      CPRR_THROW_AS(Interrupted, "interrupted while world {} (size {}) was starting", id_, size());
    }
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Rank& rank = ranks_[idx[k]];
      if (rank.reader.fill(rank.control.get()) == FrameReader::Fill::eof) {
        CPRR_THROW("{}", startup_failure(idx[k], "it closed its control channel"));
      }
    }
  }
}

std::string World::startup_failure(int rank, const std::string& why) {
  kill(std::chrono::milliseconds(200));
  RankProcess& p = *ranks_[rank].process;
  const auto& exit = p.poll();
  std::string how = exit ? " (" + exit->describe() + ")" : "";
  if (!exit && !p.lost().empty()) how = " (" + p.lost() + ")";
  std::string msg =
      fmt::format("world {} (size {}): rank {} failed to start: {}{}; its stderr:\n{}", id_, size(),
                  rank, why, how, last_bytes(logs_.since(2 * rank + 1, 0), 2000));
  if (agents_ != nullptr) {
    msg += fmt::format("\n{}; the launcher's output:\n{}", agents_->name(nodes_[rank]),
                       agents_->launcher_output());
  }
  return msg;
}

World::~World() {
  try {
    if (reusable_) {
      for (Rank& r : ranks_) {
        try {
          write_frame(r.control.get(), encode(ToRank{Shutdown{}}));
        } catch (const std::exception&) {
        }
      }
      const auto deadline = Clock::now() + std::chrono::seconds(2);
      for (Rank& r : ranks_) r.process->wait(ms_until(deadline));
    }
    kill(std::chrono::milliseconds(200));
    // Every rank is reaped: what this process inherited of theirs as a subreaper (their own
    // children that outlived them) is reaped now, not at the end of the run.
    reap_orphans();
  } catch (const std::exception&) {
  }
  std::error_code ec;
  std::filesystem::remove_all(rendezvous_, ec);
}

void World::kill(std::chrono::milliseconds grace) {
  reusable_ = false;
  bool any = false;
  for (Rank& r : ranks_) any = any || !r.process->gone();
  if (any) {
    // Abort first: a rank stuck in an NCCL collective ends it with ncclCommAbort and exits, so
    // the GPU is left clean; TERM and KILL are for ranks that cannot even do that.
    const std::string abort = encode(ToRank{Abort{}});
    for (Rank& r : ranks_) {
      if (r.eof || r.process->gone()) continue;
      try {
        write_frame(r.control.get(), abort);
      } catch (const std::exception&) {
      }
    }
    const auto abort_deadline = Clock::now() + grace;
    for (Rank& r : ranks_) r.process->wait(ms_until(abort_deadline));
    for (Rank& r : ranks_) r.process->signal(SIGTERM);
    const auto deadline = Clock::now() + grace;
    for (Rank& r : ranks_) r.process->wait(ms_until(deadline));
    for (Rank& r : ranks_) r.process->signal(SIGKILL);
  }
  for (Rank& r : ranks_) r.process->wait(5000);
  // Only now: an unreaped rank kept the group's id from being reused while it was signalled.
  for (Rank& r : ranks_) r.process->reap();
  logs_.wait_eof(500);
}

void World::read_flight_records(uint64_t execution, std::vector<RankReport>& reports) {
  for (int r = 0; r < size(); ++r) {
    if (reports[r].done) continue;
    if (auto entered = read_flight_record(flight_record_path(rendezvous_, r), execution)) {
      reports[r].entered = std::move(*entered);
    }
  }
}

void World::fill_tails(std::vector<RankReport>& reports) {
  logs_.drain_now();
  for (int r = 0; r < size(); ++r) {
    reports[r].stdout_tail = logs_.since(2 * r, ranks_[r].out_mark);
    reports[r].stderr_tail = logs_.since(2 * r + 1, ranks_[r].err_mark);
  }
}

}  // namespace cprr

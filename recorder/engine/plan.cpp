#include "recorder/engine/plan.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "data/text_forms.h"
#include "kernels/rng.h"
#include "recorder/launch/process.h"
#include "runtime/error.h"
#include "runtime/fd.h"

namespace cprr {
namespace {

void expand_grid(const CaseInfo& info, std::size_t axis, Params& current,
                 std::vector<Params>& out) {
  if (axis == info.options.grid.size()) {
    out.push_back(current);
    return;
  }
  const GridAxis& a = info.options.grid[axis];
  for (const std::string& v : a.values) {
    current[a.name] = v;
    expand_grid(info, axis + 1, current, out);
  }
  current.erase(a.name);
}

}  // namespace

std::vector<CaseInstance> expand(const Catalog& catalog, const std::optional<std::regex>& filter) {
  std::vector<CaseInstance> out;
  for (const CaseInfo& info : catalog.cases) {
    std::vector<Params> points;
    Params current;
    expand_grid(info, 0, current, points);
    for (const Params& p : points) {
      for (int w : info.options.world_sizes) {
        CaseInstance inst{0, info, p, w, 0};
        const std::string label = inst.label();
        if (filter && !std::regex_search(label, *filter)) continue;
        inst.seed = XXH3_64bits(label.data(), label.size()) & kMaxSeed;
        inst.id = static_cast<uint32_t>(out.size() + 1);
        out.push_back(std::move(inst));
      }
    }
  }
  return out;
}

std::vector<CaseInstance> narrow(std::vector<CaseInstance> plan, const Selection& selection) {
  std::erase_if(plan, [&](const CaseInstance& inst) {
    const std::string label = inst.label();
    if (selection.exclude && std::regex_search(label, *selection.exclude)) return true;
    return selection.labels && !selection.labels->contains(label);
  });
  for (std::size_t i = 0; i < plan.size(); ++i) plan[i].id = static_cast<uint32_t>(i + 1);
  return plan;
}

std::vector<CaseInstance> select(std::vector<CaseInstance> plan, const Selection& selection) {
  plan = narrow(std::move(plan), selection);
  const Shard& shard = selection.shard;
  std::erase_if(plan, [&](const CaseInstance& inst) {
    if (selection.shard_of) {
      const auto it = selection.shard_of->find(inst.label());
      return it == selection.shard_of->end() || it->second != shard.index;
    }
    return inst.seed % shard.count + 1 != shard.index;
  });
  return plan;
}

std::map<std::string, uint32_t> shards_by_time(const std::vector<CaseInstance>& plan,
                                               const std::map<std::string, double>& wall_ms,
                                               uint32_t count) {
  std::vector<double> known;
  for (const CaseInstance& inst : plan) {
    if (const auto it = wall_ms.find(inst.label()); it != wall_ms.end())
      known.push_back(it->second);
  }
  double median = 1;
  if (!known.empty()) {
    std::nth_element(known.begin(), known.begin() + known.size() / 2, known.end());
    median = known[known.size() / 2];
  }
  std::vector<std::pair<double, std::string>> items;
  for (const CaseInstance& inst : plan) {
    const auto it = wall_ms.find(inst.label());
    items.emplace_back(it == wall_ms.end() ? median : it->second, inst.label());
  }
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<double> load(std::max<uint32_t>(count, 1), 0.0);
  std::map<std::string, uint32_t> out;
  for (const auto& [ms, label] : items) {
    const auto least = std::min_element(load.begin(), load.end());
    *least += ms;
    out[label] = static_cast<uint32_t>(least - load.begin()) + 1;
  }
  return out;
}

std::string plan_hash(const std::vector<CaseInstance>& plan, std::string_view mode, int repeat) {
  std::string text = fmt::format("mode={};repeat={}\n", mode, repeat);
  for (const CaseInstance& inst : plan) {
    text += fmt::format("{} {}\n", inst.label(), expect_name(inst.info.options.expect));
  }
  return fmt::format("{:016x}", XXH3_64bits(text.data(), text.size()));
}

std::vector<std::size_t> shuffled_order(std::size_t n, uint64_t seed, int repeat) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  // kernels/rng.h: SplitMix64, defined bit for bit. Fisher-Yates; the modulo's bias (below
  // 2^-40 for any real plan) does not matter for an order.
  Rng rng(random_at(seed, static_cast<uint64_t>(repeat)));
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.next() % i]);
  return order;
}

std::optional<uint64_t> parse_shuffle_seed(const std::string& text) {
  uint64_t seed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || seed > kMaxSeed) {
    return std::nullopt;
  }
  return seed;
}

namespace {

// Kills whatever is left of the catalog run's process group (a worker that forked leaves its
// children there) and reaps the worker, on every way out of fetch_catalog. The group is killed
// before the worker (its leader) is reaped: an unreaped leader keeps its pid, and so the group's
// id, from being reused.
class CatalogRun {
 public:
  explicit CatalogRun(const SpawnSpec& spec) : proc_(ChildProcess::spawn(spec)) {}
  ~CatalogRun() {
    try {
      proc_.signal_group(SIGKILL);
    } catch (const std::exception&) {
    }
    proc_.wait(-1);
  }
  CatalogRun(const CatalogRun&) = delete;
  CatalogRun& operator=(const CatalogRun&) = delete;
  ChildProcess& process() { return proc_; }

 private:
  ChildProcess proc_;
};

}  // namespace

Catalog fetch_catalog(const std::string& worker, const std::vector<std::string>& worker_args) {
  int sv[2];
  CPRR_SYSCALL(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
  UniqueFd parent(sv[0]), child(sv[1]);
  UniqueFd devnull(CPRR_SYSCALL(::open("/dev/null", O_RDWR | O_CLOEXEC)));
  const int slot = control_fd_slot();
  SpawnSpec spec;
  spec.argv = {worker};
  spec.argv.insert(spec.argv.end(), worker_args.begin(), worker_args.end());
  for (const char* arg : {"--rank", "0", "--world-size", "1", "--control-fd"})
    spec.argv.push_back(arg);
  spec.argv.push_back(std::to_string(slot));
  spec.argv.push_back("--catalog");
  // The catalog run's banners are irrelevant; its stderr stays visible for diagnosis. It leads
  // its own process group (process_group 0), so anything it forks is killed with it.
  spec.fds = {{devnull.get(), 0}, {devnull.get(), 1}, {child.get(), slot}, {2, 2}};
  CatalogRun run(spec);
  ChildProcess& proc = run.process();
  child.reset();
  FrameReader reader;
  // A hang guard, not a time bound: a Python worker says hello once it has imported torch and
  // every case file: 6.5 s for a small suite on a 2-core box at load 4, several times that on a
  // busier one. A worker that never answers still cannot hang cprecord.
  constexpr int kCatalogTimeoutMs = 300000;
  try {
    auto hello = read_frame(parent.get(), reader, kCatalogTimeoutMs);
    CPRR_CHECK(hello.has_value(), "closed its control channel before saying hello");
    decode_hello(*hello);
    auto frame = read_frame(parent.get(), reader, kCatalogTimeoutMs);
    CPRR_CHECK(frame.has_value(), "closed its control channel before sending its catalog");
    FromRank msg = decode_from_rank(*frame);
    auto* cat = std::get_if<Catalog>(&msg);
    CPRR_CHECK(cat != nullptr, "answered --catalog with something else");
    return std::move(*cat);
  } catch (const std::exception& e) {
    const auto& exit = proc.wait(2000);
    CPRR_THROW(
        "cannot read the case catalog of worker '{}' (it has {} s to import its cases and "
        "answer): {}{}",
        worker, kCatalogTimeoutMs / 1000, e.what(), exit ? " (" + exit->describe() + ")" : "");
  }
}

}  // namespace cprr

#include "recorder/engine/world_startup.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <string_view>

namespace cprr {
namespace {

double ms_between(std::chrono::steady_clock::time_point from,
                  std::chrono::steady_clock::time_point to) {
  return std::max(0.0, std::chrono::duration<double, std::milli>(to - from).count());
}

constexpr std::string_view kWaiting = "messages and waiting";

}  // namespace

std::vector<StartupPhase> world_startup_phases(std::chrono::steady_clock::time_point begin,
                                               std::chrono::steady_clock::time_point ready,
                                               const std::vector<RankStart>& ranks) {
  std::vector<StartupPhase> out;
  if (!ranks.empty()) {
    const auto by = [](auto field) {
      return [field](const RankStart& a, const RankStart& b) { return a.*field < b.*field; };
    };
    const RankStart& last_hello =
        *std::max_element(ranks.begin(), ranks.end(), by(&RankStart::hello_at));
    const RankStart& last_joined =
        *std::max_element(ranks.begin(), ranks.end(), by(&RankStart::connected_at));
    out.push_back({"spawn ranks", ms_between(begin, last_hello.spawned_at)});
    const double to_hello = ms_between(last_hello.spawned_at, last_hello.hello_at);
    out.push_back({"exec and load", std::max(0.0, to_hello - total_ms(last_hello.before_hello))});
    for (const StartupPhase& p : last_hello.before_hello) out.push_back(p);
    for (const StartupPhase& p : last_joined.connecting) out.push_back(p);
  }
  out.push_back({std::string(kWaiting), std::max(0.0, ms_between(begin, ready) - total_ms(out))});
  return out;
}

std::string summarize_pools(const std::vector<std::string>& pools) {
  if (std::adjacent_find(pools.begin(), pools.end(), std::not_equal_to<>()) == pools.end()) {
    return pools.empty() ? std::string() : pools.front();
  }
  std::string out;
  for (std::size_t r = 0; r < pools.size(); ++r) {
    out += fmt::format("{}rank {}: {}", r == 0 ? "" : "; ", r, pools[r]);
  }
  return out;
}

std::string pool_after_case(const std::vector<RankReport>& ranks, const std::string& at_start) {
  std::vector<std::string> pools;
  for (const RankReport& r : ranks) {
    if (!r.done || r.done->symmetric_pool.empty()) return at_start;
    pools.push_back(r.done->symmetric_pool);
  }
  return pools.empty() ? at_start : summarize_pools(pools);
}

std::vector<StartupPhase> first_use_phases(const std::vector<RankReport>& ranks) {
  const std::vector<StartupPhase>* most = nullptr;
  for (const RankReport& r : ranks) {
    if (!r.done || r.done->first_use.empty()) continue;
    if (most == nullptr || total_ms(r.done->first_use) > total_ms(*most)) most = &r.done->first_use;
  }
  return most ? *most : std::vector<StartupPhase>{};
}

}  // namespace cprr

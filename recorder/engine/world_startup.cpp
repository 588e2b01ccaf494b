#include "recorder/engine/world_startup.h"

#include <algorithm>
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

}  // namespace cprr

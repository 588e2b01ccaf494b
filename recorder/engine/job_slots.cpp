#include "recorder/engine/job_slots.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "runtime/backend.h"
#include "runtime/error.h"

namespace cprr {
namespace {

// Parts [begin, end) of `n` items split into `parts` as equal as they divide (the first ones
// one larger), part `k` of them.
std::pair<std::size_t, std::size_t> part_of(std::size_t n, int parts, int k) {
  const std::size_t base = n / parts, extra = n % parts;
  const std::size_t begin = k * base + std::min<std::size_t>(k, extra);
  return {begin, begin + base + (static_cast<std::size_t>(k) < extra ? 1 : 0)};
}

// "0-3,6": runs of consecutive cores.
std::string ranges(const std::vector<int>& cpus) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    parts.push_back(i == j ? std::to_string(cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

}  // namespace

Machine this_machine(BackendKind backend) {
  Machine m;
  m.backend = backend;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) m.cpus.push_back(c);
    }
  }
  if (m.cpus.empty()) m.cpus.push_back(0);
  if (backend == BackendKind::cuda) m.gpus = gpu_uuids();
  return m;
}

int default_jobs(const Machine& m, int largest_world) {
  const std::size_t units = m.backend == BackendKind::cuda ? m.gpus.size() : m.cpus.size();
  const int fit = static_cast<int>(units / static_cast<std::size_t>(std::max(largest_world, 1)));
  return std::clamp(fit, 1, kMaxDefaultJobs);
}

std::vector<JobSlot> job_slots(const Machine& m, int jobs) {
  CPRR_CHECK(jobs >= 1, "job_slots: {} jobs", jobs);
  if (jobs == 1) return {JobSlot{m.cpus, m.gpus}};
  if (m.backend == BackendKind::cuda && m.gpus.size() < static_cast<std::size_t>(jobs)) {
    CPRR_THROW_AS(UsageError,
                  "--jobs {}: {} GPU(s) are visible, and worlds running side by side never share "
                  "a GPU; give --jobs {} or fewer",
                  jobs, m.gpus.size(), std::max<std::size_t>(m.gpus.size(), 1));
  }
  std::vector<JobSlot> slots(jobs);
  for (int k = 0; k < jobs; ++k) {
    if (m.cpus.size() >= static_cast<std::size_t>(jobs)) {
      const auto [a, b] = part_of(m.cpus.size(), jobs, k);
      slots[k].cpus.assign(m.cpus.begin() + a, m.cpus.begin() + b);
    } else {  // more jobs than cores: each job one core, taken in turn
      slots[k].cpus = {m.cpus[k % m.cpus.size()]};
    }
    if (!m.gpus.empty()) {
      const auto [a, b] = part_of(m.gpus.size(), jobs, k);
      slots[k].gpus.assign(m.gpus.begin() + a, m.gpus.begin() + b);
    }
  }
  return slots;
}

std::string devices_text(const JobSlot& slot, BackendKind backend) {
  if (backend == BackendKind::cuda) return fmt::format("gpus {}", fmt::join(slot.gpus, ","));
  return "cpus " + ranges(slot.cpus);
}

std::vector<std::pair<std::string, std::string>> job_env(const JobSlot& slot, BackendKind backend) {
  std::vector<std::pair<std::string, std::string>> env;
  if (backend == BackendKind::cuda) {
    env.emplace_back("CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(slot.gpus, ",")));
  }
  return env;
}

void set_env(std::vector<std::pair<std::string, std::string>>& env, const std::string& key,
             const std::string& value) {
  const auto it =
      std::find_if(env.begin(), env.end(), [&](const auto& kv) { return kv.first == key; });
  if (it == env.end()) {
    env.emplace_back(key, value);
  } else {
    it->second = value;
  }
}

void pin_this_thread(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  CPRR_SYSCALL(::sched_setaffinity(0, sizeof set, &set));
}

std::optional<std::vector<int>> cpus_of(const std::string& devices) {
  constexpr std::string_view kPrefix = "cpus ";
  if (!devices.starts_with(kPrefix)) return std::nullopt;
  std::vector<int> out;
  std::string_view rest = std::string_view(devices).substr(kPrefix.size());
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view part = rest.substr(0, comma);
    const std::size_t dash = part.find('-');
    int a = 0, b = 0;
    const auto number = [](std::string_view digits, int& v) {
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      return ec == std::errc() && end == digits.data() + digits.size() && !digits.empty();
    };
    if (!number(part.substr(0, dash), a)) return std::nullopt;
    b = a;
    if (dash != std::string_view::npos && !number(part.substr(dash + 1), b)) return std::nullopt;
    if (b < a || a < 0 || b >= CPU_SETSIZE) return std::nullopt;
    for (int c = a; c <= b; ++c) out.push_back(c);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
    if (rest.empty()) return std::nullopt;  // a trailing comma
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<std::string> gpus_of(const std::string& devices) {
  constexpr std::string_view kPrefix = "gpus ";
  if (!devices.starts_with(kPrefix) || devices.size() == kPrefix.size()) return std::nullopt;
  return devices.substr(kPrefix.size());
}

ScopedPin::ScopedPin(const std::vector<int>& cpus) : before_(this_machine(BackendKind::cpu).cpus) {
  pin_this_thread(cpus);
}

ScopedPin::~ScopedPin() {
  try {
    pin_this_thread(before_);
  } catch (const std::exception&) {
  }
}

}  // namespace cprr

#pragma once
// Two small helpers the engine's waits and failure messages share (World, TemplateSpawner).
#include <chrono>
#include <string>

namespace cprr {

/// Milliseconds from now until `deadline`, rounded up; 0 once it passed (a poll() timeout).
inline int ms_until(std::chrono::steady_clock::time_point deadline) {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

/// The last `max_bytes` of `text`, marked "..." when cut: what a message quotes of an output.
inline std::string last_bytes(const std::string& text, std::size_t max_bytes) {
  return text.size() <= max_bytes ? text : "..." + text.substr(text.size() - max_bytes);
}

}  // namespace cprr

#include "data/shard.h"

#include <fmt/format.h>

#include <charconv>
#include <string_view>

namespace cprr {
namespace {

constexpr std::string_view kByTime = " by time";

}  // namespace

std::optional<Shard> parse_shard(const std::string& text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string::npos) return std::nullopt;
  Shard s;
  const auto number = [](std::string_view digits, uint32_t& out) {
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc() && end == digits.data() + digits.size() && !digits.empty();
  };
  const std::string_view t(text);
  if (!number(t.substr(0, slash), s.index) || !number(t.substr(slash + 1), s.count)) {
    return std::nullopt;
  }
  if (s.count == 0 || s.index == 0 || s.index > s.count) return std::nullopt;
  return s;
}

std::string shard_text(const Shard& shard) {
  return fmt::format("{}/{}{}", shard.index, shard.count, shard.by_time ? kByTime : "");
}

std::optional<Shard> shard_of_run(const std::string& text) {
  if (text.empty()) return Shard{};
  const bool by_time = text.ends_with(kByTime);
  std::optional<Shard> s =
      parse_shard(by_time ? text.substr(0, text.size() - kByTime.size()) : text);
  if (s) s->by_time = by_time;
  return s;
}

}  // namespace cprr

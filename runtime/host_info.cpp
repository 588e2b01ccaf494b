#include "runtime/host_info.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>

namespace cprr {

std::string iso8601_utc(std::chrono::system_clock::time_point t, TimeText form) {
  const auto since = std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch());
  const auto secs = std::chrono::floor<std::chrono::seconds>(since);
  const std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  if (form == TimeText::junit) return buf;
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>((since - secs).count()));
  return out;
}

std::optional<std::chrono::system_clock::time_point> parse_iso8601_utc(std::string_view text) {
  // d: a decimal digit. cprr before schema 2 wrote whole seconds ("...:ssZ"); both are read.
  constexpr std::string_view kShapeMs = "dddd-dd-ddTdd:dd:dd.dddZ";
  constexpr std::string_view kShapeS = "dddd-dd-ddTdd:dd:ddZ";
  const std::string_view kShape = text.size() == kShapeS.size() ? kShapeS : kShapeMs;
  if (text.size() != kShape.size()) return std::nullopt;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (kShape[i] == 'd' ? !digit : text[i] != kShape[i]) return std::nullopt;
  }
  const auto number = [&](std::size_t at, std::size_t n) {
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) v = v * 10 + (text[i] - '0');
    return v;
  };
  using namespace std::chrono;
  const year_month_day date{year{number(0, 4)}, month{static_cast<unsigned>(number(5, 2))},
                            day{static_cast<unsigned>(number(8, 2))}};
  const int h = number(11, 2), m = number(14, 2), s = number(17, 2);
  if (!date.ok() || h > 23 || m > 59 || s > 59) return std::nullopt;
  const int ms = kShape.size() == kShapeMs.size() ? number(20, 3) : 0;
  return sys_days{date} + hours{h} + minutes{m} + seconds{s} + milliseconds{ms};
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace cprr

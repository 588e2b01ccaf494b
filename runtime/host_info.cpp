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

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace cprr

// One rule for numbers read from the environment (env_number.h).
#include "runtime/env_number.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "runtime/error.h"

namespace cprr {

std::optional<long long> env_number(const char* name, long long lo, long long hi,
                                    std::string_view what) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  const char* last = v + std::strlen(v);
  long long n = 0;
  const auto [end, ec] = std::from_chars(v, last, n);
  if (ec != std::errc() || end != last || n < lo || n > hi) {
    CPRR_THROW_AS(UsageError, "{}='{}' is not {} (from {} to {}): unset it or give one", name, v,
                  what, lo, hi);
  }
  return n;
}

}  // namespace cprr

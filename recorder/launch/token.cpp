#include "recorder/launch/token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>

#include "runtime/error.h"

namespace cprr {

std::string make_token() {
  unsigned char bytes[32];
  for (std::size_t got = 0; got < sizeof bytes;) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(__FILE__, __LINE__, "getrandom");
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

bool tokens_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  // volatile keeps the compiler from turning the loop into an early-exit memcmp.
  const volatile char* pa = a.data();
  const volatile char* pb = b.data();
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(pa[i] ^ pb[i]);
  return diff == 0;
}

}  // namespace cprr

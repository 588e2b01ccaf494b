#pragma once
// The per-run secret a launched rank proves it belongs to this run with. It travels in the
// environment (CPRR_TOKEN), never on a command line another user can read in `ps`.
#include <string>
#include <string_view>

namespace cprr {

/// The environment variable that carries the token to a launched rank's supervisor.
inline constexpr const char* kTokenEnv = "CPRR_TOKEN";

/// 32 bytes from the kernel's random source, as 64 hex digits.
std::string make_token();

/// Compares in time that depends only on the lengths, never on where the first difference is,
/// so a peer cannot learn the token byte by byte from how fast it is refused.
bool tokens_equal(std::string_view a, std::string_view b);

}  // namespace cprr

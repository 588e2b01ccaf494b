#pragma once
// Which device runtime a run's ranks use: decided once, by resolve_backend (runtime/backend.h)
// from --backend, recorded in run.backend and carried as this value from there to every world
// and rank, its replays included. Only the store, the messages and a rank's command line say it
// as a word.
#include <cstdint>
#include <optional>
#include <string_view>

namespace cprr {

enum class BackendKind : uint8_t { cpu, cuda };

/// "cpu" | "cuda": what run.backend, --backend and the messages say.
constexpr std::string_view backend_name(BackendKind k) {
  return k == BackendKind::cuda ? "cuda" : "cpu";
}

/// backend_name's inverse; nullopt for any other word ("auto" is --backend's, resolved first).
constexpr std::optional<BackendKind> parse_backend_kind(std::string_view s) {
  if (s == backend_name(BackendKind::cpu)) return BackendKind::cpu;
  if (s == backend_name(BackendKind::cuda)) return BackendKind::cuda;
  return std::nullopt;
}

}  // namespace cprr

#include "data/text_forms.h"

#include <array>
#include <utility>

namespace cprr {
namespace {

template <class E, std::size_t N>
using Table = std::array<std::pair<E, std::string_view>, N>;

constexpr Table<Expect, 4> kExpect{{{Expect::pass, "pass"},
                                    {Expect::fail, "fail"},
                                    {Expect::crash, "crash"},
                                    {Expect::hang, "hang"}}};
constexpr Table<Mode, 2> kMode{{{Mode::fresh, "fresh"}, {Mode::pool, "pool"}}};
constexpr Table<ExecStatus, 6> kStatus{{{ExecStatus::pass, "pass"},
                                        {ExecStatus::fail, "fail"},
                                        {ExecStatus::crash, "crash"},
                                        {ExecStatus::hang, "hang"},
                                        {ExecStatus::error, "error"},
                                        {ExecStatus::skip, "skip"}}};
constexpr Table<RankOutcome, 4> kOutcome{{{RankOutcome::ok, "ok"},
                                          {RankOutcome::fail, "fail"},
                                          {RankOutcome::error, "error"},
                                          {RankOutcome::skip, "skip"}}};
constexpr Table<LauncherKind, 3> kLauncher{{{LauncherKind::local, "local"},
                                            {LauncherKind::mpirun, "mpirun"},
                                            {LauncherKind::srun, "srun"}}};

template <class E, std::size_t N>
std::string_view name_in(const Table<E, N>& table, E e) {
  for (const auto& [value, name] : table) {
    if (value == e) return name;
  }
  return "?";
}

template <class E, std::size_t N>
std::optional<E> parse_in(const Table<E, N>& table, std::string_view s) {
  for (const auto& [value, name] : table) {
    if (name == s) return value;
  }
  return std::nullopt;
}

}  // namespace

std::string_view expect_name(Expect e) { return name_in(kExpect, e); }
std::optional<Expect> parse_expect(std::string_view s) { return parse_in(kExpect, s); }
std::string_view mode_name(Mode m) { return name_in(kMode, m); }
std::optional<Mode> parse_mode(std::string_view s) { return parse_in(kMode, s); }
std::string_view modes_name(const std::vector<Mode>& modes) {
  if (modes == std::vector<Mode>{Mode::fresh, Mode::pool}) return "both";
  return modes.size() == 1 ? mode_name(modes[0]) : "?";
}
std::optional<std::vector<Mode>> parse_modes(std::string_view s) {
  if (s == "both") return std::vector<Mode>{Mode::fresh, Mode::pool};
  if (const std::optional<Mode> m = parse_mode(s)) return std::vector<Mode>{*m};
  return std::nullopt;
}
std::string_view status_name(ExecStatus s) { return name_in(kStatus, s); }
std::optional<ExecStatus> parse_status(std::string_view s) { return parse_in(kStatus, s); }
std::string_view outcome_name(RankOutcome o) { return name_in(kOutcome, o); }
std::optional<RankOutcome> parse_outcome(std::string_view s) { return parse_in(kOutcome, s); }
std::string_view launcher_name(LauncherKind k) { return name_in(kLauncher, k); }
std::optional<LauncherKind> parse_launcher(std::string_view s) { return parse_in(kLauncher, s); }

std::string_view report_outcome_name(const RankReport& r) {
  if (r.done) return outcome_name(r.done->outcome);
  return r.exit ? "died" : "no_result";
}

}  // namespace cprr

#pragma once
// Facts about the machine and the wall clock that reports and the store write down.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace cprr {

/// How a time is written: the store keeps milliseconds ("2026-11-23T04:20:12.345Z"); JUnit's
/// timestamp attribute wants seconds and no zone ("2026-11-23T04:20:12").
enum class TimeText { store, junit };

/// `t` in ISO-8601, UTC.
std::string iso8601_utc(std::chrono::system_clock::time_point t, TimeText form = TimeText::store);

/// The inverse of iso8601_utc for the store form ("2026-11-23T04:20:12.345Z"), also reading the
/// whole-second form older cprr wrote ("2026-11-23T04:20:12Z"); nullopt for any other text, so a
/// reader can refuse what it cannot read instead of guessing.
std::optional<std::chrono::system_clock::time_point> parse_iso8601_utc(std::string_view text);

/// This machine's host name ("localhost" when it cannot be read).
std::string host_name();

}  // namespace cprr

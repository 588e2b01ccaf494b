#include "cli/junit.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <map>
#include <sstream>
#include <string_view>
#include <system_error>

#include "runtime/atomic_file.h"
#include "runtime/error.h"
#include "runtime/host_info.h"

namespace cprr {
namespace {

constexpr std::size_t kAttrMaxBytes = 300;  // attributes stay one short line
constexpr std::size_t kTailBytes = 2048;    // per rank and stream in a failure's text

// XML 1.0 "Char", less the C0/C1 controls and DEL that are legal but unreadable in a report.
bool printable_xml_char(uint32_t cp) {
  if (cp == 0x9 || cp == 0xA || cp == 0xD) return true;
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) return false;
  return cp <= 0xD7FF || (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

// Arbitrary bytes -> valid UTF-8 made only of characters XML 1.0 allows. Every byte that is not
// part of a well-formed sequence of such a character becomes the text "\xNN".
std::string sanitize(std::string_view s) {
  static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      len = 1, cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong encodings and surrogates are invalid UTF-8; the rest must be XML characters.
    ok =
        ok && cp >= kMinForLength[len] && !(cp >= 0xD800 && cp <= 0xDFFF) && printable_xml_char(cp);
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    }
  }
  return out;
}

// Escapes sanitized text for element content or a quoted attribute value.
std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\r':
        out += "&#13;";
        break;  // a raw CR would be normalized away by the parser
      default:
        out += c;
    }
  }
  return out;
}

// Any bytes -> escaped element text.
std::string text_of(std::string_view s) { return escape(sanitize(s)); }

// Any bytes -> escaped attribute value: one line, at most ~kAttrMaxBytes.
std::string attr(std::string_view s) {
  std::string line = sanitize(s);
  for (char& c : line) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (line.size() > kAttrMaxBytes) {
    std::size_t cut = kAttrMaxBytes;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
    line.resize(cut);
    line += "...";
  }
  return escape(line);
}

// The last ~kTailBytes of a rank's output, starting at a line (or at least a character) boundary.
std::string tail_of(std::string_view s) {
  if (s.size() <= kTailBytes) return std::string(s);
  std::size_t start = s.size() - kTailBytes;
  const std::size_t nl = s.find('\n', start);
  if (nl != std::string_view::npos && nl + 1 < s.size() && nl - start < 256) {
    start = nl + 1;
  } else {
    for (int k = 0; k < 3 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80; ++k) ++start;
  }
  return fmt::format("[... {} earlier bytes omitted]\n{}", start, s.substr(start));
}

// The failure/error text: what happened, then every rank's outcome, error, exit, protocol error
// and output tails. Raw (unescaped) bytes.
std::string details(const ExecutionResult& res, const CaseInstance* inst) {
  std::string out = fmt::format("{}: {}\n", status_name(res.status), res.summary);
  if (inst) out += fmt::format("expected: {}\n", expect_name(inst->info.options.expect));
  if (!res.note.empty()) out += fmt::format("note: {}\n", res.note);
  out += fmt::format("execution {}, world {}, position {}, {:.1f} ms\n", res.id, res.world_id,
                     res.pool_position, res.wall_ms);
  for (std::size_t r = 0; r < res.ranks.size(); ++r) {
    const RankReport& rep = res.ranks[r];
    out += fmt::format("\nrank {}: {}\n", r, report_outcome_name(rep));
    if (rep.done && !rep.done->error.empty()) out += fmt::format("  error: {}\n", rep.done->error);
    if (rep.exit) out += fmt::format("  exit: {}\n", rep.exit->describe());
    if (!rep.protocol_error.empty()) {
      out += fmt::format("  protocol error: {}\n", rep.protocol_error);
    }
    if (rep.watchdog) {
      const WatchdogStatus& w = *rep.watchdog;
      out += fmt::format("  watchdog: phase {}, entered #{} {}, completed #{} {}\n", w.phase,
                         w.entered_seq, w.entered_kind, w.completed_seq, w.completed_kind);
      for (const std::string& busy : w.running) out += fmt::format("    running: {}\n", busy);
    }
    for (const auto& [name, tail] :
         {std::pair<std::string_view, const std::string&>{"stdout", rep.stdout_tail},
          {"stderr", rep.stderr_tail}}) {
      if (tail.empty()) continue;
      out += fmt::format("  --- {} (last {} bytes) ---\n", name, std::min(tail.size(), kTailBytes));
      out += tail_of(tail);
      if (out.back() != '\n') out += '\n';
    }
  }
  return out;
}

// For an execution that does not count against the exit code but did not simply pass: one line
// saying what was expected and seen (a fault fixture's crash, a seeded bug showing itself).
std::string expected_line(const CaseOutcome& o, const ExecutionResult& res) {
  std::string what = res.summary;
  if (what.empty()) {
    for (std::size_t r = 0; r < res.ranks.size(); ++r) {
      if (!res.ranks[r].exit) continue;
      what +=
          fmt::format("{}rank {} {}", what.empty() ? "" : "; ", r, res.ranks[r].exit->describe());
    }
  }
  const std::string& seeded = o.instance->info.options.seeded_bug;
  if (!seeded.empty() && res.status != ExecStatus::pass) {
    return fmt::format("seeded bug ({}), expected to show: {}: {}\n", seeded,
                       status_name(res.status), what);
  }
  return fmt::format("expected {}: {}\n", status_name(res.status), what);
}

// The <failure>/<error> element's message and type for an execution that counts against the
// exit code. A missed expectation keeps the plain "status: summary" form CI reporters show.
std::pair<std::string, std::string> failure_of(const CaseOutcome& o, const ExecutionResult& res,
                                               Against why, const std::string& why_text) {
  const CaseInstance& inst = *o.instance;
  switch (why) {
    case Against::status: {
      const std::string message =
          res.summary.empty() ? fmt::format("expected {}", expect_name(inst.info.options.expect))
                              : res.summary;
      return {fmt::format("{}: {}", status_name(res.status), message),
              std::string(status_name(res.status))};
    }
    case Against::incomplete:
      return {why_text, std::string(status_name(res.status))};
    case Against::differential:
      return {why_text, "fresh_vs_pool"};
    case Against::nondeterministic:
      return {why_text, "nondeterministic"};
    case Against::race:
      return {why_text, "stream_race"};
    case Against::seeded_missed:
      return {why_text, "seeded_bug_missed"};
    case Against::allocation:
      return {why_text, "allocator_order"};
    case Against::uninitialized:
      return {why_text, "uninitialized_read"};
    case Against::collective:
      return {why_text, "collective_mismatch"};
  }
  return {why_text, "?"};
}

std::string seconds(double s) { return fmt::format("{:.3f}", s < 0 ? 0.0 : s); }

}  // namespace

void write_junit(std::ostream& out, const std::vector<CaseOutcome>& outcomes,
                 const std::vector<ExecutionResult>& results, const RunInfo& info) {
  std::map<uint32_t, const CaseOutcome*> by_id;
  for (const CaseOutcome& o : outcomes) by_id[o.instance->id] = &o;

  std::string cases;
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  for (const ExecutionResult& res : results) {
    const auto it = by_id.find(res.case_id);
    if (it == by_id.end()) continue;  // not in the plan: summarize() judged nothing for it
    const CaseOutcome& o = *it->second;
    const CaseInstance& inst = *o.instance;
    ++tests;
    std::string classname = inst.info.name;
    for (char& c : classname) {
      if (c == '/') c = '.';
    }
    cases +=
        fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{}\"", attr(classname),
                    attr(fmt::format("{} [{} #{}]", res.label, mode_name(res.mode), res.attempt)),
                    seconds(res.wall_ms / 1000.0));
    std::string body;
    if (const auto why = against_text(o, res, info)) {
      const bool infra = res.status == ExecStatus::error;
      (infra ? errors : failures) += 1;
      const auto [message, type] = failure_of(o, res, o.against.at(res.id), *why);
      std::string text = details(res, &inst);
      if (message != *why) text = *why + "\n" + text;
      const char* element = infra ? "error" : "failure";
      body += fmt::format("      <{} message=\"{}\" type=\"{}\">{}</{}>\n", element, attr(message),
                          attr(type), text_of(text), element);
    } else if (res.status == ExecStatus::skip) {
      ++skipped;  // a skip is neither a pass nor a failure: CI reporters show it as skipped
      body += fmt::format("      <skipped message=\"{}\"/>\n", attr(res.summary));
    } else {
      std::string sysout;
      if (res.status != ExecStatus::pass) sysout += expected_line(o, res);
      if (o.differential && res.mode == Mode::pool && !inst.info.options.seeded_bug.empty()) {
        sysout += fmt::format("fresh and pooled differ, as the seeded bug should: {}; replay: {}\n",
                              o.differential->describe(), replay_hint(info, o.case_id));
      }
      if (o.race && o.race->execution == res.id) {
        sysout += fmt::format(
            "{}: {}; fix: {}; replay: {}\n",
            o.race->race.candidate ? "stream race candidate (a replay confirms or drops it)"
                                   : "stream race, as the seeded bug should",
            describe_race(*o.race), describe_fix(o.race->race), replay_hint(info, o.case_id));
      }
      if (!res.note.empty()) sysout += fmt::format("note: {}\n", res.note);
      if (!sysout.empty())
        body += fmt::format("      <system-out>{}</system-out>\n", text_of(sysout));
    }
    if (body.empty()) {
      cases += "/>\n";
    } else {
      cases += ">\n" + body + "    </testcase>\n";
    }
  }

  const double wall_s = info.wall_s;
  const auto start = std::chrono::system_clock::now() -
                     std::chrono::duration_cast<std::chrono::system_clock::duration>(
                         std::chrono::duration<double>(wall_s < 0 ? 0 : wall_s));
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format(
      "<testsuites name=\"cprr\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
      "time=\"{}\">\n",
      tests, failures, errors, skipped, seconds(wall_s));
  out << fmt::format(
      "  <testsuite name=\"cprr\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
      "time=\"{}\" timestamp=\"{}\" hostname=\"{}\">\n",
      tests, failures, errors, skipped, seconds(wall_s), iso8601_utc(start, TimeText::junit),
      attr(host_name()));
  out << cases;
  out << "  </testsuite>\n</testsuites>\n";
}

void write_junit_file(const std::string& path, const std::vector<CaseOutcome>& outcomes,
                      const std::vector<ExecutionResult>& results, const RunInfo& info) {
  check_file_target("--junit", path);  // a bad path is named before the document is built
  std::ostringstream doc;
  write_junit(doc, outcomes, results, info);
  write_file_atomically("--junit", path, doc.str());
}

}  // namespace cprr

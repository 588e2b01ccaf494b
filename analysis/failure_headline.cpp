#include "analysis/failure_headline.h"

#include <fmt/format.h>

#include <optional>
#include <vector>

namespace cprr {
namespace {

constexpr std::string_view kTracebackStart = "Traceback (most recent call last):";
constexpr std::string_view kFramePrefix = "  File \"";

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

struct Frame {
  std::string_view path;
  std::string_view line;
};

// `  File "PATH", line N, in FUNC` -> PATH and N; nullopt for any other line.
std::optional<Frame> frame_of(std::string_view l) {
  if (!l.starts_with(kFramePrefix)) return std::nullopt;
  l.remove_prefix(kFramePrefix.size());
  const std::size_t quote = l.find("\", line ");
  if (quote == std::string_view::npos) return std::nullopt;
  Frame f{l.substr(0, quote), l.substr(quote + 8)};
  f.line = f.line.substr(0, f.line.find(','));
  return f;
}

// Code the user did not write: installed packages, the interpreter's own library and cprr's
// package (its modules are `cprr/_*.py`). The place a report names is the innermost frame of
// the user's code, where a torch call was made, not the line inside torch that raised.
bool library_path(std::string_view path) {
  return path.find("/site-packages/") != std::string_view::npos ||
         path.find("/cprr/_") != std::string_view::npos ||
         path.find("/dist-packages/") != std::string_view::npos ||
         path.find("/lib/python3") != std::string_view::npos || path.starts_with("<frozen ");
}

std::string_view basename(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string first_line(const std::vector<std::string_view>& lines) {
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string_view::npos) continue;
    bool more = false;
    for (std::size_t j = i + 1; j < lines.size() && !more; ++j) {
      more = lines[j].find_first_not_of(" \t\r") != std::string_view::npos;
    }
    return fmt::format("{}{}", lines[i], more ? " ..." : "");
  }
  return {};
}

}  // namespace

std::string failure_headline(std::string_view error) {
  const std::vector<std::string_view> lines = lines_of(error);
  // The last traceback of the text: a chained one ("During handling of the above exception")
  // ends with the exception that ended the case.
  std::size_t start = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].starts_with(kTracebackStart)) start = i;
  }
  if (start == lines.size()) return first_line(lines);
  std::optional<Frame> innermost, users;
  std::size_t last_frame = start;
  for (std::size_t i = start + 1; i < lines.size(); ++i) {
    if (const auto f = frame_of(lines[i])) {
      innermost = f;
      if (!library_path(f->path)) users = f;
      last_frame = i;
    }
  }
  // The exception line: the first unindented line after the last frame (the frame's source and
  // its carets are indented).
  std::string_view exception;
  for (std::size_t i = last_frame + 1; i < lines.size() && exception.empty(); ++i) {
    if (!lines[i].empty() && lines[i][0] != ' ') exception = lines[i];
  }
  if (exception.empty()) return first_line(lines);
  const std::optional<Frame>& where = users ? users : innermost;
  if (!where) return std::string(exception);
  return fmt::format("{} ({}:{})", exception, basename(where->path), where->line);
}

}  // namespace cprr

#include "recorder/launch/proc_tree.h"

#include <fmt/format.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>

namespace cprr {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  for (std::filesystem::directory_iterator it(tasks, ec), end; !ec && it != end; it.increment(ec)) {
    std::ifstream in(it->path() / "children");
    for (pid_t child = 0; in >> child;) out.push_back(child);
  }
  return out;
}

}  // namespace

std::optional<ProcStat> proc_stat(pid_t pid) {
  const std::string text = read_all("/proc/" + std::to_string(pid) + "/stat");
  // "PID (COMM) S PPID PGRP ...": COMM may hold spaces and parentheses, so the fields start
  // after the last ')'.
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
  ProcStat s;
  const char* p = text.c_str() + close + 2;
  s.state = *p++;
  char* end = nullptr;
  s.ppid = static_cast<pid_t>(std::strtol(p, &end, 10));
  s.pgrp = static_cast<pid_t>(std::strtol(end, nullptr, 10));
  return s;
}

std::vector<pid_t> descendants(pid_t pid) {
  std::vector<pid_t> out;
  std::vector<pid_t> todo = children_of(pid);
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const pid_t p = todo[i];
    const auto s = proc_stat(p);
    if (!s || s->state == 'Z') continue;  // a zombie holds no memory and runs nothing
    out.push_back(p);
    for (pid_t c : children_of(p)) todo.push_back(c);
  }
  return out;
}

std::string command_line(pid_t pid, std::size_t max) {
  std::string cmd = read_all("/proc/" + std::to_string(pid) + "/cmdline");
  while (!cmd.empty() && cmd.back() == '\0') cmd.pop_back();
  for (char& c : cmd) {
    if (c == '\0') c = ' ';
  }
  if (cmd.empty()) {
    std::string comm = read_all("/proc/" + std::to_string(pid) + "/comm");
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    return comm.empty() ? comm : "[" + comm + "]";
  }
  if (cmd.size() > max) cmd = cmd.substr(0, max) + "...";
  return cmd;
}

std::optional<pid_t> last_created_pid() {
  // "0.52 0.58 0.59 2/345 12345": the last field.
  const std::string text = read_all("/proc/loadavg");
  const std::size_t space = text.find_last_of(' ');
  if (space == std::string::npos) return std::nullopt;
  char* end = nullptr;
  const long pid = std::strtol(text.c_str() + space + 1, &end, 10);
  if (end == text.c_str() + space + 1 || pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

std::string kill_and_name(const std::vector<pid_t>& pids) {
  std::string names;
  for (pid_t p : pids) {
    names += fmt::format("{}pid {} ({})", names.empty() ? "" : ", ", p, command_line(p));
  }
  kill_each(pids);
  return names;
}

void kill_each(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) {
    if (p > 0) ::kill(p, SIGKILL);  // ESRCH: it ended by itself meanwhile
  }
}

}  // namespace cprr

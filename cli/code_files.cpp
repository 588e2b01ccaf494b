#include "cli/code_files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <xxhash.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <memory>

#include "runtime/fd.h"

namespace cprr {

std::optional<std::string> file_xxh3(const std::string& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return std::nullopt;
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                       &XXH3_freeState);
  if (!state || XXH3_64bits_reset(state.get()) != XXH_OK) return std::nullopt;
  std::array<char, 1 << 16> buf{};
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;  // a directory, or an I/O error
    if (n == 0) break;
    XXH3_64bits_update(state.get(), buf.data(), static_cast<std::size_t>(n));
  }
  return fmt::format("{:016x}", XXH3_64bits_digest(state.get()));
}

std::vector<CodeFile> fingerprint(const std::vector<std::string>& paths) {
  std::vector<CodeFile> out;
  for (const std::string& p : paths) out.push_back(CodeFile{p, file_xxh3(p).value_or("")});
  return out;
}

std::vector<std::string> code_changes(const std::vector<CodeFile>& recorded,
                                      const std::string& worker, int64_t run_id) {
  std::vector<std::string> out;
  for (const CodeFile& f : recorded) {
    if (f.xxh3.empty()) continue;
    const char* what = f.path == worker ? "worker" : "case file";
    std::error_code ec;
    if (!std::filesystem::exists(f.path, ec)) {
      out.push_back(
          fmt::format("{} {} (recorded in run {}) no longer exists", what, f.path, run_id));
    } else if (file_xxh3(f.path).value_or("") != f.xxh3) {
      out.push_back(fmt::format("{} {} changed since run {} was recorded (its content differs)",
                                what, f.path, run_id));
    }
  }
  return out;
}

}  // namespace cprr

#include "runtime/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "runtime/error.h"
#include "runtime/fd.h"

namespace cprr {
namespace {

[[noreturn]] void cannot_write(std::string_view option, const std::string& path,
                               std::string_view what, int err) {
  CPRR_THROW_AS(UsageError, "{} {}: {}: {}", option, path, what,
                std::error_code(err, std::generic_category()).message());
}

struct Target {
  std::string dir;         // for messages and the directory fsync
  std::string tmp_prefix;  // "<dir>/.<base>.tmp-"
};

Target target_of(std::string_view option, const std::string& path) {
  if (path.empty()) CPRR_THROW_AS(UsageError, "{}: the path is empty", option);
  const std::size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  struct stat st {};
  if (base.empty() || base == "." || base == ".." ||
      (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
    CPRR_THROW_AS(UsageError, "{} {}: names a directory, not a file", option, path);
  }
  Target t;
  t.dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  // Same directory as the target, so the rename is atomic and never crosses file systems.
  t.tmp_prefix = (slash == std::string::npos ? "" : path.substr(0, slash + 1)) + "." + base + ".tmp-";
  return t;
}

// A temporary file beside the target, unlinked on destruction unless kept.
class TempFile {
 public:
  TempFile(std::string_view option, const std::string& path, const Target& t)
      : name_(t.tmp_prefix + "XXXXXX"), fd_(::mkostemp(name_.data(), O_CLOEXEC)) {
    if (!fd_) {
      name_.clear();
      cannot_write(option, path, fmt::format("cannot create a file in {}", t.dir), errno);
    }
  }
  ~TempFile() {
    if (!name_.empty()) ::unlink(name_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const { return fd_.get(); }
  const std::string& name() const { return name_; }
  UniqueFd& owned_fd() { return fd_; }
  void keep() { name_.clear(); }

 private:
  std::string name_;
  UniqueFd fd_;
};

}  // namespace

void check_file_target(std::string_view option, const std::string& path) {
  const Target t = target_of(option, path);
  TempFile probe(option, path, t);  // created and removed: the directory takes new files
}

void write_file_atomically(std::string_view option, const std::string& path,
                           std::string_view bytes) {
  const Target t = target_of(option, path);
  TempFile tmp(option, path, t);
  // mkostemp creates 0600; a report is for others to read. Keep an existing file's mode.
  struct stat st {};
  const mode_t mode =
      ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? (st.st_mode & 07777) : 0644;
  if (::fchmod(tmp.fd(), mode) != 0) cannot_write(option, path, "fchmod", errno);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(tmp.fd(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) cannot_write(option, path, fmt::format("write {}", tmp.name()), errno);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(tmp.fd()) != 0) cannot_write(option, path, fmt::format("fsync {}", tmp.name()), errno);
  if (::close(tmp.owned_fd().release()) != 0) {
    cannot_write(option, path, fmt::format("close {}", tmp.name()), errno);
  }
  if (::rename(tmp.name().c_str(), path.c_str()) != 0) {
    cannot_write(option, path, fmt::format("rename {} to it", tmp.name()), errno);
  }
  tmp.keep();
  // Persist the rename itself; a file system that cannot sync directories still has the file.
  UniqueFd dir_fd(::open(t.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd) (void)::fsync(dir_fd.get());
}

}  // namespace cprr

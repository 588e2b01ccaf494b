#include "recorder/rank/descriptors.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <string>
#include <system_error>

namespace cprr {
namespace {

std::vector<int> open_descriptors() {
  std::vector<int> listed;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    listed.push_back(std::stoi(e.path().filename().string()));
  }
  // The directory iterator's own descriptor is listed too, and closed by now.
  std::erase_if(listed, [](int fd) { return ::fcntl(fd, F_GETFD) < 0; });
  std::sort(listed.begin(), listed.end());
  return listed;
}

void set_cloexec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0 && (flags & FD_CLOEXEC) == 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

// Flags [first, last] in one call; false when the kernel lacks CLOSE_RANGE_CLOEXEC.
bool cloexec_range(unsigned first, unsigned last) {
  return ::syscall(SYS_close_range, first, last, CLOSE_RANGE_CLOEXEC) == 0;
}

}  // namespace

InheritedDescriptors InheritedDescriptors::capture() {
  InheritedDescriptors d;
  d.fds_ = open_descriptors();
  return d;
}

void InheritedDescriptors::close_on_exec_rest() const {
  // The gaps between the inherited descriptors, from 0 up.
  unsigned next = 0;
  bool ranged = true;
  for (int fd : fds_) {
    const auto u = static_cast<unsigned>(fd);
    if (u > next) ranged = ranged && cloexec_range(next, u - 1);
    next = u + 1;
    if (!ranged) break;
  }
  if (ranged && cloexec_range(next, UINT_MAX)) return;
  for (int fd : open_descriptors()) {
    if (!std::binary_search(fds_.begin(), fds_.end(), fd)) set_cloexec(fd);
  }
}

}  // namespace cprr

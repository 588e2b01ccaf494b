#include "runtime/error.h"

#include <cerrno>
#include <cstring>

namespace cprr {

void throw_errno(const char* file, int line, std::string_view call) {
  const int err = errno;
  throw Error(fmt::format("{}:{}: {}: {}", short_file(file), line, call, std::strerror(err)));
}

}  // namespace cprr

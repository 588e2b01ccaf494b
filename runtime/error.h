#pragma once
// The one error rule of cprr (see docs/ARCHITECTURE.md, "Errors"):
//  - Every failure is a cprr::Error (or subclass) thrown with the file and line of the failing
//    check and the failing call, e.g. "runtime/cpu_stream.cpp:42: pthread_create: Resource ...".
//  - Errors are caught at exactly three boundaries: the worker's case runner (-> a failing rank
//    result carrying rank and case), the controller (-> an `error` execution, world respawned),
//    and a CLI main (-> message on stderr, exit code 2 for UsageError/infrastructure).
//  - Nothing prints and continues; nothing calls exit() below a main.
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace cprr {

/// Any failure inside cprr; what() carries "file:line: message".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad command-line input or an unusable input file: the message names the input and the fix.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A rank or controller sent bytes that are not a valid frame/message of this protocol version.
class ProtocolError : public Error {
 public:
  using Error::Error;
};

/// A failed check inside a case body (CPRR_EXPECT); reported as a `fail` rank result.
class CaseFailure : public Error {
 public:
  using Error::Error;
};

/// A case body skipping itself on this rank (Context::skip, a Python case's unittest.SkipTest or
/// pytest.skip): its message is the reason. Reported as a `skip` rank result.
class CaseSkipped : public Error {
 public:
  using Error::Error;
};

/// Strips the directory part so messages stay short but unambiguous within the repo.
constexpr const char* short_file(const char* path) {
  const char* last = path;
  for (const char* p = path; *p != '\0'; ++p) {
    if (*p == '/') last = p + 1;
  }
  return last;
}

template <class E = Error>
[[noreturn]] void throw_at(const char* file, int line, std::string_view message) {
  // A usage error is about the user's input, not about our code: its message names the input and
  // the fix, and a source location would only be noise.
  if constexpr (std::is_base_of_v<UsageError, E>) throw E(std::string(message));
  throw E(fmt::format("{}:{}: {}", short_file(file), line, message));
}

/// Throws Error for a failed syscall-like call: "<file>:<line>: <call>: <strerror(errno)>".
[[noreturn]] void throw_errno(const char* file, int line, std::string_view call);

}  // namespace cprr

/// Throws cprr::Error with file and line; arguments are a fmt format string and its values.
#define CPRR_THROW(...) ::cprr::throw_at(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
/// Throws an error of the given cprr::Error subclass with file and line.
#define CPRR_THROW_AS(type, ...) \
  ::cprr::throw_at<type>(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
/// Checks a condition; on failure throws cprr::Error with file, line and the formatted message.
#define CPRR_CHECK(cond, ...)                  \
  do {                                         \
    if (!(cond)) CPRR_THROW(__VA_ARGS__);      \
  } while (0)
/// Runs a call that returns -1 and sets errno on failure; throws with the call's text.
#define CPRR_SYSCALL(call)                                                 \
  ([&]() {                                                                 \
    auto cprr_rc_ = (call);                                                \
    if (cprr_rc_ == -1) ::cprr::throw_errno(__FILE__, __LINE__, #call);    \
    return cprr_rc_;                                                       \
  }())
/// Runs a call that returns an errno-style code (0 on success, e.g. posix_spawn); throws otherwise.
#define CPRR_CHECK_RC(call)                                                          \
  do {                                                                               \
    int cprr_rc_ = (call);                                                           \
    if (cprr_rc_ != 0) {                                                             \
      errno = cprr_rc_;                                                              \
      ::cprr::throw_errno(__FILE__, __LINE__, #call);                                \
    }                                                                                \
  } while (0)

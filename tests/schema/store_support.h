#pragma once
// What the store tests share: a scratch directory, the message of the error a call throws, and
// small queries and inserts.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "runtime/error.h"
#include "schema/store.h"

namespace cprr::store_test {

namespace fs = std::filesystem;

/// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/cprr_store_test_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

/// The message of the cprr::Error `f` throws ("" when it throws nothing); other exceptions fail.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Same, but the error must be a UsageError.
inline std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  } catch (const Error& e) {
    ADD_FAILURE() << "expected a UsageError, got cprr::Error: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a UsageError, nothing was thrown";
  return "";
}

inline int64_t count(const Database& db, const std::string& sql) {
  Statement s(db, sql);
  EXPECT_TRUE(s.step()) << sql;
  return s.int64(0);
}

inline std::string pragma_text(const Database& db, const std::string& pragma) {
  Statement s(db, "PRAGMA " + pragma);
  EXPECT_TRUE(s.step()) << pragma;
  return s.text(0);
}

inline void insert_run(Database& db, std::string_view host) {
  Statement s(db,
              "INSERT INTO run (started_at, tool_version, host, backend, mode, placement, worker, "
              "argv, libraries, environment) VALUES ('2024-01-01T00:00:00Z', '0.1.0', ?, 'cpu', "
              "'pool', 'packed', '/w', '[]', '{}', '{}')");
  s.bind(1, host).run();
}

}  // namespace cprr::store_test

#pragma once
// What the cprecord tests share: run_record in-process into one scratch database per test
// process, options for a worker and a filter, the JSON document's cases; the real binary runs
// through tests/cli/cli_run.h.
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "commands/record_command.h"
#include "tests/cli/cli_run.h"

namespace cprr::record_test {

using json = nlohmann::json;

inline const std::string kWorker = CPRR_WORKER_PATH;
inline const std::string kFixture = CPRR_FIXTURE_WORKER_PATH;
inline const std::string kCprecord = CPRR_CPRECORD_PATH;
inline const std::string kCpreplay = CPRR_CPREPLAY_PATH;

struct Recorded {
  int code = -1;
  std::string out;
  std::string err;
};

inline Recorded record(RecordOptions o) {
  std::ostringstream out, err;
  Recorded r;
  r.code = run_record(o, out, err, /*progress=*/false, /*color=*/false);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// Every recording of this file goes to one scratch database, not to ./cprr.db.
inline const std::string& test_db() {
  struct Scratch {
    std::string path = "/tmp/cprr-record-command-test-" + std::to_string(::getpid()) + ".db";
    // Removes the scratch file and every sibling a test derived from it (path + ".describe"...).
    ~Scratch() {
      const std::filesystem::path p(path);
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(p.parent_path(), ec)) {
        if (e.path().filename().string().rfind(p.filename().string(), 0) == 0) {
          std::filesystem::remove(e.path(), ec);
        }
      }
    }
  };
  static const Scratch scratch;
  return scratch.path;
}

inline RecordOptions opts(const std::string& worker, const std::string& filter,
                          bool as_json = true) {
  RecordOptions o;
  o.db = test_db();
  o.shared.worker = worker;
  o.filter = filter;
  o.json = as_json;
  o.jobs = 1;  // one world at a time, as the tests' orders expect, on a machine of any size
  return o;
}

inline const json* find_case(const json& doc, const std::string& label) {
  for (const json& c : doc.at("cases")) {
    if (c.at("label") == label) return &c;
  }
  return nullptr;
}

inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace cprr::record_test

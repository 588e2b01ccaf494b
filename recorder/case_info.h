#pragma once
// A registered case's metadata: what the controller needs to plan executions without running
// any case code (it travels in the worker's catalog).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cprr {

/// The outcome a case is written to have. Fault fixtures (a rank that segfaults, a rank that
/// skips a collective) expect crash/hang; cprecord counts an execution as failing only when its
/// status differs from the expectation, so the corpus run is green exactly when the harness
/// classified every fixture right.
enum class Expect : uint8_t { pass, fail, crash, hang };

std::string_view expect_name(Expect e);
std::optional<Expect> parse_expect(std::string_view s);

/// One parameter axis of a case's grid; executions cover the cross product of all axes.
struct GridAxis {
  std::string name;
  std::vector<std::string> values;

  template <class A>
  void serialize(A& a) {
    a(name, values);
  }
};

/// Options a case author gives at registration (designated initializers in CPRR_CASE).
struct CaseOptions {
  std::vector<int> world_sizes{2, 4};
  std::vector<GridAxis> grid;
  Expect expect = Expect::pass;
  double timeout_s = 0;      ///< per-case deadline; 0 means cprecord's --timeout
  std::string description;
};

/// A case as the catalog lists it.
struct CaseInfo {
  std::string name;
  CaseOptions options;

  template <class A>
  void serialize(A& a) {
    a(name, options.world_sizes, options.grid, options.expect, options.timeout_s,
      options.description);
  }
};

}  // namespace cprr

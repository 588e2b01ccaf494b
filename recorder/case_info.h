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
  /// For a seeded bug: the verdict the harness must reach (e.g. "state_leak"). cprecord --mode
  /// both counts such a case as expected only when the fresh-vs-pooled differential flags it;
  /// a run of one mode cannot see that, so there it only has to run to completion.
  std::string seeded_bug;
};

/// A case as the catalog lists it.
struct CaseInfo {
  std::string name;
  CaseOptions options;

  template <class A>
  void serialize(A& a) {
    a(name, options.world_sizes, options.grid, options.expect, options.timeout_s,
      options.description, options.seeded_bug);
  }
};

}  // namespace cprr

#pragma once
// A registered case's metadata: what the controller needs to plan executions without running
// any case code (it travels in the worker's catalog).
#include <cstdint>
#include <map>
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

/// One parameter axis of a case's grid; executions cover the cross product of all axes.
struct GridAxis {
  std::string name;
  std::vector<std::string> values;

  bool operator==(const GridAxis&) const = default;
  template <class A>
  void serialize(A& a) {
    a(name, values);
  }
};

/// Options a case author gives at registration (designated initializers in CPRR_CASE, keywords of
/// `_cprr.CaseOptions` from Python). This struct is the one description of them: fields() names
/// each, and the wire format and the Python binding are both made from that list.
struct CaseOptions {
  std::vector<int> world_sizes{2, 4};
  std::vector<GridAxis> grid;
  Expect expect = Expect::pass;
  double timeout_s = 0;  ///< per-case deadline; 0 means cprecord's --timeout
  std::string description;
  /// For a seeded bug: the verdict the harness must reach (e.g. "state_leak"). Its executions
  /// only have to run to completion (a seeded collective mismatch may also abort or hang), and
  /// what they show is not held against the run; a bug a record-time check names (stream_race,
  /// allocator_order, uninitialized_read, collective_mismatch) counts against it when that check
  /// misses it (analysis/judgement.cpp). A state leak is named by cpreplay's replays.
  std::string seeded_bug;

  bool operator==(const CaseOptions&) const = default;

  /// Calls visit(name, &CaseOptions::member) for every field, in wire order. A new field is
  /// added here and where it is used; the catalog's bytes and the binding follow.
  template <class Visit>
  static constexpr void fields(Visit&& visit) {
    visit("world_sizes", &CaseOptions::world_sizes);
    visit("grid", &CaseOptions::grid);
    visit("expect", &CaseOptions::expect);
    visit("timeout_s", &CaseOptions::timeout_s);
    visit("description", &CaseOptions::description);
    visit("seeded_bug", &CaseOptions::seeded_bug);
  }
  template <class A>
  void serialize(A& a) {
    fields([&](const char*, auto member) { a(this->*member); });
  }
};

/// A case as the catalog lists it.
struct CaseInfo {
  std::string name;
  CaseOptions options;

  bool operator==(const CaseInfo&) const = default;
  template <class A>
  void serialize(A& a) {
    a(name, options);
  }
};

/// A case's parameters (one value per grid axis), ordered by name so their text form is canonical.
using Params = std::map<std::string, std::string>;

/// Seeds stay below 2^53: JSON consumers (jq, JavaScript) read numbers as doubles, and the store's
/// INTEGER column then holds them as plain positive numbers.
inline constexpr uint64_t kMaxSeed = (uint64_t{1} << 53) - 1;

/// One planned execution unit: a case at one grid point and world size. What cprecord runs and
/// the store keeps as a "case".
struct CaseInstance {
  uint32_t id = 0;  ///< 1-based position in the plan
  CaseInfo info;
  Params params;
  int world_size = 1;
  uint64_t seed = 0;  ///< from the label: stable across runs and machines; <= kMaxSeed

  bool operator==(const CaseInstance&) const = default;
  /// "name{k=v,k2=v2}@w" (the braces only when there are parameters). Filters match this.
  std::string label() const;
};

}  // namespace cprr

#pragma once
// What the in-process Context suites share: a world-of-one CPU backend's rank state, and the
// message of the CaseFailure a call throws.
#include <memory>
#include <string>

#include "recorder/api/context.h"

namespace cprr::test {

inline RankState make_state(int rank = 0) {
  RankState s;
  s.rank = rank;
  s.world_size = 1;
  s.backend = make_backend(BackendConfig{BackendKind::cpu, 0, 1, ""});
  for (MemPool pool : {MemPool::device, MemPool::symmetric, MemPool::host}) {
    s.engines[static_cast<int>(pool)] = std::make_unique<PlacementEngine>(
        s.backend->arena_capacity(pool), 256, Placement::best_fit);
  }
  return s;
}

/// What `f` threw as a CaseFailure; says so when it threw something else or nothing.
template <class F>
std::string case_failure_of(F f) {
  try {
    f();
  } catch (const CaseFailure& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a CaseFailure: ") + e.what();
  }
  return "no exception";
}

}  // namespace cprr::test

#pragma once
// Registering cases, in the spirit of gtest's TEST():
//
//   CPRR_CASE(allreduce, "healthy/allreduce",
//             {.world_sizes = {2, 4}, .grid = {{"count", {"1", "4096"}}, {"dtype", {"f32"}}}}) {
//     Buffer b = ctx.alloc("data", ctx.param_int("count") * 4);
//     ...
//   }
//
// The body gets `ctx`, a cprr::Context. CPRR_RESET_HOOK runs before every case on every rank
// (restore what your code caches in globals); CPRR_WORKER_INIT runs once when a rank starts.
// There is no exit hook: on the cuda backend a rank told to shut down exits at once, without
// static destructors or atexit handlers (Backend::teardown_left_to_exit), so a case must not
// leave work for them (write and close its files in the body).
#include <functional>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "data/case_info.h"
#include "recorder/api/context.h"
#include "runtime/transport.h"

namespace cprr {

/// A case's body: a function of CPRR_CASE, or a Python case's callable (python/).
using CaseBody = std::function<void(Context&)>;
using Hook = void (*)();

/// What a rank's world is once it joined its communicator, for a ConnectedHook.
struct WorldJoined {
  /// How the world's collectives travel (the controller's choice, Bootstrap::transport).
  CollectiveTransport transport = CollectiveTransport::gloo;
  int device_index = -1;  ///< the rank's GPU, or -1 on the cpu backend
};
/// Runs once a rank's world is connected, before its first case (a standby world's while
/// earlier cases run): the case-independent set-up a language binding makes for every case
/// (python/: torch's default process group). Returns the start-up phase it names ("" for none);
/// throws when the world cannot serve cases, which fails the world's start.
using ConnectedHook = std::function<std::string(const WorldJoined&)>;

struct RegisteredCase {
  CaseInfo info;
  CaseBody body = nullptr;
  std::string where;  ///< "file:line" of its CPRR_CASE, for messages; empty when unknown
};

/// The cases and hooks linked into this binary. Filled by static initializers before main and
/// read-only afterwards; registration errors (duplicate names) are kept and reported by the
/// worker at start rather than thrown from a static initializer.
class Registry {
 public:
  /// `where`: "file:line" of the definition, so a name defined twice names both places.
  void add_case(std::string name, CaseOptions options, CaseBody body, std::string where = {});
  void add_reset_hook(Hook hook) { reset_hooks_.push_back(hook); }
  void add_worker_init(Hook hook) { worker_inits_.push_back(hook); }
  void add_connected_hook(ConnectedHook hook) { connected_hooks_.push_back(std::move(hook)); }
  /// A problem found while loading cases some other way (a Python case file that failed to
  /// import): reported like a registration error.
  void add_error(std::string message) { errors_.push_back(std::move(message)); }
  /// A file cases were loaded from (a Python case file): the catalog names it (Catalog::files).
  void add_source_file(std::string path) { source_files_.push_back(std::move(path)); }

  const RegisteredCase* find(std::string_view name) const;
  const std::vector<RegisteredCase>& cases() const { return cases_; }
  const std::vector<Hook>& reset_hooks() const { return reset_hooks_; }
  const std::vector<Hook>& worker_inits() const { return worker_inits_; }
  const std::vector<ConnectedHook>& connected_hooks() const { return connected_hooks_; }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::vector<std::string>& source_files() const { return source_files_; }

 private:
  std::vector<RegisteredCase> cases_;
  std::vector<Hook> reset_hooks_;
  std::vector<Hook> worker_inits_;
  std::vector<ConnectedHook> connected_hooks_;
  std::vector<std::string> errors_;
  std::vector<std::string> source_files_;
};

/// The process's registry. A function-local static is the one global cprr has: static
/// registration needs a place that exists before main.
Registry& registry();

/// CPRR_CASE's registration; `where` defaults to the macro's place in the case author's file.
bool register_case(std::string name, CaseOptions options, CaseBody body,
                   std::source_location where = std::source_location::current());
bool register_reset_hook(Hook hook);
bool register_worker_init(Hook hook);

}  // namespace cprr

#define CPRR_CASE(ident, name, ...)                                                     \
  static void cprr_case_##ident(::cprr::Context& ctx);                                  \
  [[maybe_unused]] static const bool cprr_case_registered_##ident =                     \
      ::cprr::register_case(name, ::cprr::CaseOptions __VA_ARGS__, &cprr_case_##ident); \
  static void cprr_case_##ident([[maybe_unused]] ::cprr::Context& ctx)

#define CPRR_RESET_HOOK(ident)                                       \
  static void cprr_reset_##ident();                                  \
  [[maybe_unused]] static const bool cprr_reset_registered_##ident = \
      ::cprr::register_reset_hook(&cprr_reset_##ident);              \
  static void cprr_reset_##ident()

#define CPRR_WORKER_INIT(ident)                                     \
  static void cprr_init_##ident();                                  \
  [[maybe_unused]] static const bool cprr_init_registered_##ident = \
      ::cprr::register_worker_init(&cprr_init_##ident);             \
  static void cprr_init_##ident()

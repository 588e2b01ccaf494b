#pragma once
// What cprecord reports from the judgement (analysis/judgement.h): the --json document and the
// words both it and the table and JUnit use (replay command, why an execution counts against the
// run). The table is report_table.h.
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/judgement.h"
#include "data/text_forms.h"
#include "runtime/backend_kind.h"

namespace cprr {

struct RunInfo {
  int64_t run_id = 0;
  std::string db;      ///< absolute path of the store
  std::string db_arg;  ///< --db as given, for the replay command printed to the user
  std::string worker;
  BackendKind backend = BackendKind::cpu;
  std::string mode;
  double wall_s = 0;
  int exit_code = 0;                     ///< what cprecord returns (128 + signal when interrupted)
  std::optional<std::string> stopped;    ///< why the run ended before its plan (--fail-fast)
  std::optional<uint64_t> shuffle_seed;  ///< --shuffle: the seed of the case order
  std::string launcher = "local";        ///< --launcher and its options (engine/launcher.h)
  int signal = 0;  ///< the signal that interrupted the run (its cases are not judged); 0: none
};

/// What identifies a planned instance in JSON (plan_id, name, label, params, world_size, seed,
/// expect, seeded_bug): shared by the run document and `cprecord --list --json`.
nlohmann::json instance_json(const CaseInstance& inst);

/// The `race` object of a case (--json of cprecord and cpreplay): both ops, the buffer(s) and the
/// bytes within the buffer, the pool and whose memory, streams, ranks, the missing edge's fix,
/// where it was seen, and `confirmed_by` (the dynamic checks that confirmed it: empty at record
/// time, filled by cpreplay).
nlohmann::json race_json(const RaceFinding& f, const std::vector<std::string>& confirmed_by = {});

/// The `allocation` object (verdict allocator_order): the k-th symmetric allocation, both ranks'
/// name, offset, size and allocation event, where it was seen.
nlohmann::json allocation_json(const Finding<LayoutMismatch>& f);
/// The `uninitialized_read` object: the reading op (rank, position, stream, kind, name), the
/// buffer, pool and the unwritten bytes within the buffer, where it was seen; `more`: the other
/// reads of never-written bytes in that execution (its "more" list).
nlohmann::json uninitialized_json(const Finding<UninitRead>& f,
                                  const std::vector<UninitRead>& more = {});
/// The `collective_mismatch` object: the collective's number, the field, both ranks and values.
nlohmann::json collective_json(const Finding<CollectiveMismatch>& f);

/// The command that replays case `case_id` of this run ("cpreplay --case 12", with --db when the
/// store is not the default one).
std::string replay_hint(const RunInfo& info, int64_t case_id);

/// One line saying why `execution` counts against the exit code, or nullopt when it does not.
std::optional<std::string> against_text(const CaseOutcome& o, const ExecutionResult& execution,
                                        const RunInfo& info);

/// The --json document: run, backend, mode, and per case its identity, status, verdict,
/// expectation, fresh-vs-pool divergence and executions (each with `as_expected` from the one
/// judgement and, when it counts against the run, `unexpected` saying why).
void print_json(std::ostream& out, const std::vector<CaseOutcome>& outcomes, const RunInfo& info);

}  // namespace cprr

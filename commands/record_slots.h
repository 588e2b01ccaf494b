#pragma once
// cprecord --jobs: the slots the machine is split into (recorder/engine/job_slots.h), each job's
// worlds placed on its own, and what is said about GPUs the ranks share.
#include <ostream>
#include <string>
#include <vector>

#include "commands/record_plan.h"
#include "recorder/engine/controller.h"
#include "recorder/engine/job_slots.h"

namespace cprr {

/// The slots for `o.jobs` (0: the machine's default for the plan's largest world), one per job;
/// one with everything for a single job or a launcher. Says on `err` how the jobs share the
/// machine: each on its own cores or GPUs, or the cores in turn where jobs outnumber them.
std::vector<JobSlot> slots_of(const RecordOptions& o, const RecordSetup& s,
                              const std::vector<CaseInstance>& plan, std::ostream& err);

/// The fewest GPUs any slot holds.
int smallest_gpu_share(const std::vector<JobSlot>& slots);

/// Job `job` of `jobs`: its worlds on `slot` alone (this thread pinned to its cores), its ids its
/// own, its devices recorded.
void place_job(ControllerConfig& cc, const JobSlot& slot, int job, int jobs, BackendKind backend);

/// One line per world size whose ranks share GPUs (or --collectives gloo), before the run;
/// --collectives nccl where they would share is refused (UsageError).
void say_gpu_sharing(const std::vector<CaseInstance>& plan, const RecordOptions& o, int gpus,
                     std::ostream& err);

}  // namespace cprr

#include "commands/record_slots.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "data/text_forms.h"
#include "recorder/engine/job_slots.h"
#include "runtime/error.h"
#include "runtime/transport_choice.h"

namespace cprr {

// --jobs: the slots the machine is split into, one per job (one with everything for one job).
std::vector<JobSlot> slots_of(const RecordOptions& o, const RecordSetup& s,
                              const std::vector<CaseInstance>& plan, std::ostream& err) {
  const Machine machine = this_machine(s.backend);
  if (o.jobs < 0) CPRR_THROW_AS(UsageError, "--jobs {}: give 1 or more", o.jobs);
  int jobs = o.jobs;
  if (o.launch.kind != LauncherKind::local) {
    if (jobs > 1) {
      CPRR_THROW_AS(UsageError,
                    "--jobs {} with --launcher {}: a launcher's worlds run one at a time; run "
                    "one cprecord per allocation and merge their databases (--merge)",
                    jobs, launcher_name(o.launch.kind));
    }
    return job_slots(machine, 1);
  }
  if (jobs == 0) {
    int largest = 1;
    for (const CaseInstance& c : plan) largest = std::max(largest, c.world_size);
    jobs = default_jobs(machine, largest);
  }
  std::vector<JobSlot> slots = job_slots(machine, jobs);
  if (jobs > 1 && s.backend == BackendKind::cpu &&
      machine.cpus.size() < static_cast<std::size_t>(jobs)) {
    // job_slots gave each job one core, in turn: say so, as the worlds' times are not their own.
    err << fmt::format(
        "cprecord: {} jobs on {} core(s): they share the cores, each job pinned to one of them "
        "in turn; worlds side by side slow each other (give --jobs {} or fewer for cores of "
        "their own)\n",
        jobs, machine.cpus.size(), machine.cpus.size());
  } else if (jobs > 1) {
    err << fmt::format("cprecord: {} jobs, each on its own {}: {}\n", jobs,
                       s.backend == BackendKind::cuda ? "GPUs" : "cores", [&] {
                         std::vector<std::string> parts;
                         for (const JobSlot& slot : slots)
                           parts.push_back(devices_text(slot, s.backend));
                         return fmt::format("{}", fmt::join(parts, "; "));
                       }());
  }
  return slots;
}

int smallest_gpu_share(const std::vector<JobSlot>& slots) {
  std::size_t least = slots.front().gpus.size();
  for (const JobSlot& slot : slots) least = std::min(least, slot.gpus.size());
  return static_cast<int>(least);
}

// Job `job` of `jobs`: its worlds on its slot alone, its ids its own, its placement recorded.
void place_job(ControllerConfig& cc, const JobSlot& slot, int job, int jobs, BackendKind backend) {
  pin_this_thread(slot.cpus);  // the job's thread: every rank and template it starts inherits it
  for (const auto& [key, value] : job_env(slot, backend)) set_env(cc.env, key, value);
  cc.devices = devices_text(slot, backend);
  cc.first_id = static_cast<uint64_t>(job) + 1;
  cc.id_step = static_cast<uint64_t>(jobs);
}

// One line per world size whose ranks share GPUs (or --collectives gloo), before the run: the
// transport every execution then records is no surprise; --collectives nccl where they would
// share is refused here, not world by world. Only the local launcher's worlds are
// known here (a launcher's ranks see their own node's GPUs).
void say_gpu_sharing(const std::vector<CaseInstance>& plan, const RecordOptions& o, int gpus,
                     std::ostream& err) {
  if (o.launch.kind != LauncherKind::local) return;
  const CollectivesRequest collectives = o.shared.run.requested();
  std::set<int> sizes;
  for (const CaseInstance& c : plan) sizes.insert(c.world_size);
  for (int w : sizes) local_transport(w, gpus, collectives);  // refuses before any line is said
  for (int w : sizes) {
    if (const std::string line = sharing_line(w, gpus, collectives); !line.empty()) {
      err << "cprecord: " << line << '\n';
    }
  }
}

}  // namespace cprr

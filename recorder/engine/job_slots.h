#pragma once
// cprecord --jobs: the machine split into slots, one per job, so worlds running side by side share
// no core and no GPU. A job's worlds run on its slot alone: its ranks are pinned to the slot's
// cores (cpu) or see only its GPUs (cuda, CUDA_VISIBLE_DEVICES), and each execution records
// where it ran (ExecutionResult::devices).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend_kind.h"

namespace cprr {

struct JobSlot {
  std::vector<int> cpus;          ///< the cores its ranks are pinned to
  std::vector<std::string> gpus;  ///< cuda: what CUDA_VISIBLE_DEVICES names (UUIDs or indexes)
};

/// What a slot is made from: the cores this process may use, the GPUs it sees (names as
/// CUDA_VISIBLE_DEVICES takes them, in device order), the backend.
struct Machine {
  std::vector<int> cpus;
  std::vector<std::string> gpus;
  BackendKind backend = BackendKind::cpu;
};

/// This process's machine: its CPU affinity and, on cuda, gpu_uuids().
Machine this_machine(BackendKind backend);

/// --jobs' default: cpu, as many worlds of the largest size as the cores hold (cores / W); cuda,
/// as many as hold a GPU per rank (GPUs / W); at least 1, at most kMaxDefaultJobs.
inline constexpr int kMaxDefaultJobs = 8;
int default_jobs(const Machine& m, int largest_world);

/// Splits the machine into `jobs` slots of contiguous cores and GPUs, as equal as they divide.
/// Throws UsageError when a cuda slot would get no GPU of its own (worlds never share a GPU
/// across jobs). One job: one slot with everything.
std::vector<JobSlot> job_slots(const Machine& m, int jobs);

/// ExecutionResult::devices for a slot: "cpus 0-3,6" on cpu, "gpus GPU-...,GPU-..." on cuda.
std::string devices_text(const JobSlot& slot, BackendKind backend);

/// What a job's worlds get in their ranks' environment: CUDA_VISIBLE_DEVICES on cuda. (Each job's
/// MASTER_PORT is a port claimed for it: ControllerConfig::master_port.)
std::vector<std::pair<std::string, std::string>> job_env(const JobSlot& slot, BackendKind backend);

/// Sets `key` in a world's variables (WorldSpec::env), replacing the entry it has: a child's
/// getenv finds the first of two.
void set_env(std::vector<std::pair<std::string, std::string>>& env, const std::string& key,
             const std::string& value);

/// Pins the calling thread (and so every process it starts from now on) to `cpus`.
void pin_this_thread(const std::vector<int>& cpus);

/// devices_text's inverse for a cpu slot: the cores of "cpus 0-3,6"; nullopt for anything else.
std::optional<std::vector<int>> cpus_of(const std::string& devices);
/// ... and for a cuda slot: the GPUs of "gpus GPU-a,GPU-b" as CUDA_VISIBLE_DEVICES takes them.
std::optional<std::string> gpus_of(const std::string& devices);

/// Pins the calling thread to some cores for its lifetime, then gives it back the ones it had
/// (cpreplay --pin: the replay's ranks start on the cores the record's ran on).
class ScopedPin {
 public:
  explicit ScopedPin(const std::vector<int>& cpus);
  ~ScopedPin();
  ScopedPin(const ScopedPin&) = delete;
  ScopedPin& operator=(const ScopedPin&) = delete;

 private:
  std::vector<int> before_;
};

}  // namespace cprr

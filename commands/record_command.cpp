#include "commands/record_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/cli_options.h"
#include "cli/code_files.h"
#include "commands/merge_command.h"
#include "commands/record_options.h"
#include "commands/record_plan.h"
#include "commands/record_report.h"
#include "commands/record_run.h"
#include "commands/record_slots.h"
#include "data/shard.h"
#include "recorder/engine/controller.h"
#include "recorder/launch/interrupt.h"
#include "recorder/launch/port_claim.h"
#include "recorder/protocol/protocol.h"
#include "runtime/atomic_file.h"
#include "schema/record_writer.h"

namespace cprr {
namespace {

RunMeta run_meta(const RecordOptions& o, const RecordSetup& s,
                 const std::vector<std::string>& argv) {
  const std::string shard = o.shard.empty() ? "" : shard_text(s.selection.shard);
  return RunMeta{s.backend,      s.modes,
                 s.placement,    s.worker,
                 argv,           kProtocolVersion,
                 s.shuffle_seed, o.launch,
                 s.worker_args,  fingerprint(s.code),
                 shard,          s.plan_hash};
}

ControllerConfig controller_config(const RecordOptions& o, const RecordSetup& s) {
  ControllerConfig cc;
  cc.worker = s.worker;
  cc.worker_args = s.worker_args;
  cc.backend = s.backend;
  cc.launch = o.launch;
  apply_shared(o.shared, cc);
  return cc;
}

}  // namespace

int run_record(const RecordOptions& o, std::ostream& out, std::ostream& err, bool progress,
               bool color, const std::vector<std::string>& argv) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!o.merge.empty()) return run_merge(o, out, err, color, argv);
  RecordSetup s = resolve(o);
  const std::optional<std::vector<CaseInstance>> plan = plan_of(o, s, err);
  if (!plan) return 0;
  if (o.list) {
    print_plan(out, *plan, o.json);
    return 0;
  }
  if (plan->empty()) {  // an empty shard: a run of no case, recorded and reported (for --merge)
    RecordWriter writer(o.db, run_meta(o, s, argv));
    return finish_run(o, s, Ran{*plan, {}, PlanRun{}, t0}, writer, out, err, color);
  }
  if (!o.junit.empty()) check_file_target("--junit", o.junit);  // before the run, not after
  const std::vector<JobSlot> slots = slots_of(o, s, *plan, err);
  const int jobs = static_cast<int>(slots.size());
  // A MASTER_PORT per job that no other cprr on this host shares, held until the run ends;
  // claimed before the run is written, so a bad base leaves nothing in the database.
  const std::vector<PortClaim> ports = claim_ports(jobs, master_port_base());
  if (s.backend == BackendKind::cuda) say_gpu_sharing(*plan, o, smallest_gpu_share(slots), err);
  if (!o.shared.trace.empty()) prepare_trace_dir(o.shared.trace);
  RecordWriter writer(o.db, run_meta(o, s, argv));
  const std::vector<int64_t> case_ids = writer.add_cases(*plan);
  const PlanRun executed = run_plan_jobs(
      RecordPlan{*plan, case_ids, s.modes, o.repeat, s.placement, o.fail_fast, s.shuffle_seed},
      jobs,
      [&](int job) {
        ControllerConfig cc = controller_config(o, s);
        cc.master_port = ports[job].port();
        if (jobs > 1) place_job(cc, slots[job], job, jobs, s.backend);
        return std::make_unique<Controller>(std::move(cc));
      },
      writer,
      progress ? ProgressStyle::tty : (o.log_lines ? ProgressStyle::lines : ProgressStyle::none),
      err);
  return finish_run(o, s, Ran{*plan, case_ids, executed, t0}, writer, out, err, color);
}

int record_main(int argc, char** argv) {
  RecordOptions o;
  CLI::App app{
      "cprecord: run multi-rank test cases in a pool of rank processes or in fresh "
      "processes, and report per-case status."};
  LaunchFlags launch;
  add_record_options(app, o, launch);
  app.footer(record_footer());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const bool tty_err = ::isatty(STDERR_FILENO) != 0;
  std::optional<InterruptWatch> interrupt;  // Ctrl-C ends the run cleanly: record, report, exit
  const bool color = ::isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr && !o.json;
  try {
    interrupt.emplace();
    o.shared.interrupt = &*interrupt;
    o.log_lines = !tty_err;  // a CI log gets a line per execution as it finishes
    o.launch = finish_launch_options(launch);
    o.shared.run.fork_from_template = python_template_from_env();
    return run_record(o, std::cout, std::cerr, tty_err, color,
                      std::vector<std::string>(argv, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "cprecord: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace cprr

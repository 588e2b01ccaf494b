// Recording-overhead benchmark: each case runs recorded (captures hashed in the ranks,
// shipped in CaseDone, decoded, stored in SQLite as cprecord stores them) and not recorded
// (CPRR_CAPTURE=off in the ranks, nothing stored), each in its own pooled world, interleaved in
// one run (the order alternates every run, so drift hits both alike). Prints figures; asserts
// nothing.
//
//   cprr_bench_recording [--backend auto|cpu|cuda] [--worker PATH] [--runs N] [--block FLOATS]
//                        [--small-bytes B] [--small-count K] [--store thread|inline] [--world-size
//                        W]
//
// Cases: healthy/cp_ring@2 (CP-shaped: two probes and two outputs per rank of 4*block bytes
// each; --block defaults to 64 Mi floats = 256 MiB on cuda, 1 Mi floats = 4 MiB on cpu, where
// the hash runs on the CPU and dominates) and bench/small_captures@2 (one small buffer captured
// K+1 times per rank). The overhead is split into:
//   hash      the ranks' body time, recorded minus not (the slowest rank; captures are hashed in
//             stream order, so the body's drain waits for them);
//   transfer  encoding each rank's CaseDone (the slowest rank) and passing it through a
//             socketpair as a frame, and
//   decode    decoding every rank's frame (one after another, as the controller does), both
//             measured here on the recorded result minus the same on the unrecorded one (which
//             still ships its op and allocation logs);
//   store     what dispatch waits for the store (--store thread, the default: handing the
//             result to cprecord's writer thread, RecordQueue; --store inline: the commit itself,
//             on the dispatch path), and apart from that the commit of one execution
//             (RecordWriter::write, timed where it runs);
//   rest      what the parts do not explain (scheduling, the rest of the controller's path).
// Then the same back to back, as cprecord runs a plan: when commits take longer than the case,
// the writer thread's queue fills and dispatch waits for the store after all, which the
// interleaved figures (with time between recorded runs) do not show.
// Targets (GPU): <= 3% on cp_ring with 256 MiB captures, <= 10 us per small capture.
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "recorder/engine/controller.h"
#include "recorder/engine/plan.h"
#include "recorder/protocol/protocol.h"
#include "runtime/backend.h"
#include "runtime/error.h"
#include "runtime/fd.h"
#include "schema/record_queue.h"
#include "schema/record_writer.h"
#include "tools/bench/timing.h"

namespace {

using Clock = std::chrono::steady_clock;
using cprr::bench::median;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A scratch database that is gone when the benchmark ends.
struct ScratchDb {
  explicit ScratchDb(const std::string& name)
      : path((std::filesystem::temp_directory_path() / name).string()) {
    remove();
  }
  ~ScratchDb() { remove(); }
  void remove() const {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  }
  std::string path;
};

// One execution's figures, in milliseconds.
struct Sample {
  double on = 0, off = 0;                     // wall time per execution, as cprecord's loop sees it
  double body_on = 0, body_off = 0;           // the slowest rank's body
  double encode = 0, socket = 0, decode = 0;  // recorded minus not recorded (Wire)
  double store_wait = 0, commit = 0;  // dispatch's wait for the store; one execution's commit
};

// Exits on anything but a pass: a benchmark of failures means nothing.
void require_pass(const cprr::ExecutionResult& r) {
  if (r.status == cprr::ExecStatus::pass) return;
  std::fprintf(stderr, "%s did not pass: %s\n", r.label.c_str(), r.summary.c_str());
  std::exit(1);
}

double slowest_body(const cprr::ExecutionResult& r) {
  double ms = 0;
  for (const cprr::RankReport& rep : r.ranks) ms = std::max(ms, rep.done ? rep.done->body_ms : 0);
  return ms;
}

// What shipping one execution's CaseDones costs, in milliseconds: encoding (every rank, the
// slowest counts: ranks encode at once), passing the frame through a socketpair (the slowest
// rank), decoding (every rank, one after another, as the controller does).
struct Wire {
  double encode = 0, socket = 0, decode = 0;
};

// One encoded frame through a socketpair, as a rank sends its CaseDone. The reader thread is
// started (and blocked in read) before the clock starts, since a frame can be larger than the
// socket's buffer; it stops the clock when the whole frame is in. Returns the payload read.
std::string pass_frame(const std::string& frame, double& ms) {
  int sv[2];
  CPRR_SYSCALL(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
  cprr::UniqueFd tx(sv[0]), rx(sv[1]);
  Clock::time_point t1;
  std::string payload;
  std::thread reader([&] {
    cprr::FrameReader fr;
    payload = cprr::read_frame(rx.get(), fr).value_or("");
    t1 = Clock::now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the reader waits in read()
  const auto t0 = Clock::now();
  cprr::write_encoded_frame(tx.get(), frame);
  reader.join();
  ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  return payload;
}

// `buffer` is reused from call to call, as a rank reuses its frame buffer (RankChannel).
Wire wire_figures(const cprr::ExecutionResult& r, std::string& buffer) {
  Wire w;
  for (const cprr::RankReport& rep : r.ranks) {
    const cprr::FromRank msg{cprr::CaseDone{*rep.done}};
    auto t0 = Clock::now();
    cprr::encode_frame(msg, buffer);
    w.encode = std::max(w.encode, ms_since(t0));
    double socket = 0;
    const std::string payload = pass_frame(buffer, socket);
    w.socket = std::max(w.socket, socket);
    t0 = Clock::now();
    const cprr::FromRank back = cprr::decode_from_rank(payload);
    w.decode += ms_since(t0);
  }
  return w;
}

// Commit times measured on the writer thread, in milliseconds.
struct CommitTimes {
  std::mutex mu;
  std::vector<double> ms;
};

struct Bench {
  cprr::Controller& recorded;
  cprr::Controller& plain;
  cprr::RecordWriter& writer;  // the run's database, written as cprecord writes it
  cprr::RecordQueue* queue;    // cprecord's writer thread; nullptr: --store inline
  CommitTimes& commits;
  std::deque<cprr::ExecutionResult> kept;  // the queue reads them until drained
  std::string frame;                       // wire_figures' encode buffer
};

// Stores `r` as cprecord does (or in place for --store inline); returns how long dispatch waited.
double store(Bench& b, const cprr::ExecutionResult& r, int64_t case_id) {
  const auto t0 = Clock::now();
  if (b.queue != nullptr) {
    b.queue->submit(r, case_id);
    return ms_since(t0);
  }
  b.writer.write(r, case_id);
  const double ms = ms_since(t0);
  const std::lock_guard lock(b.commits.mu);
  b.commits.ms.push_back(ms);
  return ms;
}

Sample one_run(Bench& b, const cprr::CaseInstance& inst, int64_t case_id, bool off_first) {
  Sample s;
  cprr::ExecutionResult off;
  auto run_off = [&] {
    const auto t0 = Clock::now();
    off = b.plain.run(inst, cprr::Mode::pool);
    s.off = ms_since(t0);
  };
  if (off_first) run_off();
  const auto t0 = Clock::now();
  const cprr::ExecutionResult& on = b.kept.emplace_back(b.recorded.run(inst, cprr::Mode::pool));
  s.store_wait = store(b, on, case_id);
  s.on = ms_since(t0);
  if (!off_first) run_off();
  require_pass(on);
  require_pass(off);
  s.body_on = slowest_body(on);
  s.body_off = slowest_body(off);
  const Wire w_on = wire_figures(on, b.frame), w_off = wire_figures(off, b.frame);
  s.encode = w_on.encode - w_off.encode;
  s.socket = w_on.socket - w_off.socket;
  s.decode = w_on.decode - w_off.decode;
  return s;
}

// Back to back, as cprecord runs a plan: `n` recorded executions handed to the store one after
// another (the queue fills when commits are slower than the case), then drained, against `n`
// unrecorded ones; `blocks` of each, alternating. Returns the median ms per execution {on, off}.
std::pair<double, double> back_to_back(Bench& b, const cprr::CaseInstance& inst, int64_t case_id,
                                       int n, int blocks) {
  std::vector<double> on, off;
  for (int k = 0; k < blocks; ++k) {
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      require_pass(b.kept.emplace_back(b.recorded.run(inst, cprr::Mode::pool)));
      store(b, b.kept.back(), case_id);
    }
    if (b.queue != nullptr) b.queue->drain();
    on.push_back(ms_since(t0) / n);
    b.kept.clear();
    t0 = Clock::now();
    for (int i = 0; i < n; ++i) require_pass(b.plain.run(inst, cprr::Mode::pool));
    off.push_back(ms_since(t0) / n);
  }
  return {median(on), median(off)};
}

struct Row {
  std::string label;
  std::size_t captures_per_rank = 0;
  double mib_per_capture = 0;
  Sample median;
  double b2b_on = 0, b2b_off = 0;  // back_to_back
};

Row measure(Bench& b, cprr::CaseInstance inst, int runs, int64_t case_id) {
  const cprr::ExecutionResult warm = b.recorded.run(inst, cprr::Mode::pool);  // worlds, arenas
  require_pass(warm);
  require_pass(b.plain.run(inst, cprr::Mode::pool));
  std::vector<Sample> samples;
  for (int i = 0; i < runs; ++i) samples.push_back(one_run(b, inst, case_id, i % 2 == 1));
  if (b.queue != nullptr) b.queue->drain();
  b.kept.clear();
  double commit = 0;
  {
    const std::lock_guard lock(b.commits.mu);
    commit = median(b.commits.ms);
    b.commits.ms.clear();
  }
  auto med = [&](double Sample::*field) {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(s.*field);
    return median(v);
  };
  Row row{inst.label(), 0, 0, {}};
  const cprr::CaseCapture& cap = warm.ranks.at(0).done->capture;
  row.captures_per_rank = cap.probes.size() + cap.outputs.size();
  if (!cap.outputs.empty()) row.mib_per_capture = cap.outputs[0].bytes / double(1 << 20);
  for (double Sample::*f :
       {&Sample::on, &Sample::off, &Sample::body_on, &Sample::body_off, &Sample::encode,
        &Sample::socket, &Sample::decode, &Sample::store_wait}) {
    row.median.*f = med(f);
  }
  row.median.commit = commit;
  std::tie(row.b2b_on, row.b2b_off) = back_to_back(b, inst, case_id, runs, 3);
  {
    const std::lock_guard lock(b.commits.mu);
    b.commits.ms.clear();
  }
  return row;
}

void print(const std::vector<Row>& rows, const std::string& backend, int runs,
           const std::string& store_mode) {
  std::printf(
      "recording overhead: backend %s, pooled, %d interleaved runs each (recorded, not recorded), "
      "medians; store: %s\n",
      backend.c_str(), runs, store_mode.c_str());
  std::printf("%-44s %8s %9s %9s %9s %10s %8s %12s\n", "case", "capt/rk", "MiB/capt", "off ms",
              "on ms", "overhd ms", "overhd", "us/capture");
  for (const Row& r : rows) {
    const double over = r.median.on - r.median.off;
    std::printf("%-44s %8zu %9.3f %9.3f %9.3f %10.3f %7.1f%% %12.1f\n", r.label.c_str(),
                r.captures_per_rank, r.mib_per_capture, r.median.off, r.median.on, over,
                100.0 * over / r.median.off, 1e3 * over / r.captures_per_rank);
  }
  std::printf(
      "breakdown per execution, ms: hash = slowest rank's body, on - off; transfer = encode + "
      "socket,\n  decode = every rank's frame, both on - off; store wait = what dispatch waited "
      "for the store;\n  commit = one execution's transaction; rest = overhead - hash - transfer "
      "- decode - store wait\n");
  std::printf("%-44s %9s %9s %9s %9s %11s %9s %9s\n", "case", "hash", "encode", "socket", "decode",
              "store wait", "commit", "rest");
  for (const Row& r : rows) {
    const Sample& m = r.median;
    const double hash = m.body_on - m.body_off;
    const double rest = (m.on - m.off) - hash - m.encode - m.socket - m.decode - m.store_wait;
    std::printf("%-44s %9.3f %9.3f %9.3f %9.3f %11.3f %9.3f %9.3f\n", r.label.c_str(), hash,
                m.encode, m.socket, m.decode, m.store_wait, m.commit, rest);
  }
  std::printf(
      "back to back (as cprecord runs a plan: %d executions stored, then drained, against %d "
      "not recorded; median of 3 blocks), ms per execution\n",
      runs, runs);
  std::printf("%-44s %9s %9s %10s %8s %12s\n", "case", "off ms", "on ms", "overhd ms", "overhd",
              "us/capture");
  for (const Row& r : rows) {
    const double over = r.b2b_on - r.b2b_off;
    std::printf("%-44s %9.3f %9.3f %10.3f %7.1f%% %12.1f\n", r.label.c_str(), r.b2b_off, r.b2b_on,
                over, 100.0 * over / r.b2b_off, 1e3 * over / r.captures_per_rank);
  }
  std::printf(
      "targets (GPU): <= 3%% on cp_ring with 256 MiB captures; <= 10 us per small "
      "capture\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string worker = CPRR_BENCH_WORKER_PATH, backend = "auto", store_mode = "thread";
  int runs = 20, world_size = 0;  // world_size 0: chosen once the backend is known
  uint64_t block = 0, small_bytes = 256, small_count = 1000;
  CLI::App app{"cprr recording benchmark: captures on vs off, interleaved, with a breakdown"};
  app.add_option("--backend", backend, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--worker", worker, "worker binary with the corpus and bench/ cases");
  app.add_option("--runs", runs, "timed runs per variant and case")->check(CLI::PositiveNumber);
  app.add_option("--block", block,
                 "cp_ring block in floats (captures are 4*block bytes; default 64 Mi on cuda, "
                 "1 Mi on cpu)");
  app.add_option("--small-bytes", small_bytes, "bytes of bench/small_captures' buffer")
      ->check(CLI::Range(uint64_t{4}, cprr::kRawCaptureLimit));
  app.add_option("--small-count", small_count, "probes of bench/small_captures")
      ->check(CLI::PositiveNumber);
  app.add_option("--store", store_mode,
                 "thread: commit on cprecord's writer thread (RecordQueue); inline: commit before "
                 "the next case, on the dispatch path")
      ->check(CLI::IsMember({"thread", "inline"}));
  app.add_option("--world-size", world_size,
                 "ranks per case (default 2; 1 on cuda with one GPU visible, where cp_ring runs "
                 "its one step without exchanging)")
      ->check(CLI::Range(1, 2));
  CLI11_PARSE(app, argc, argv);
  try {
    const cprr::BackendKind kind = cprr::resolve_backend(backend);
    backend = cprr::backend_name(kind);
    if (world_size == 0) {
      world_size = kind == cprr::BackendKind::cuda && cprr::visible_gpus(nullptr) < 2 ? 1 : 2;
      if (world_size == 1) std::printf("one GPU visible: W=1 (cp_ring exchanges nothing)\n");
    }
    if (block == 0)
      block = kind == cprr::BackendKind::cuda ? uint64_t{64} << 20 : uint64_t{1} << 20;
    const auto catalog = cprr::fetch_catalog(worker);
    cprr::CaseInstance ring =
        cprr::expand(catalog, std::regex("^healthy/cp_ring\\{block=1024\\}@2$")).at(0);
    ring.params["block"] = std::to_string(block);
    ring.world_size = world_size;
    cprr::CaseInstance small = cprr::expand(catalog, std::regex("^bench/small_captures")).at(0);
    small.params["bytes"] = std::to_string(small_bytes);
    small.params["count"] = std::to_string(small_count);
    small.world_size = world_size;

    cprr::ControllerConfig cc;
    cc.worker = worker;
    cc.backend = kind;
    cprr::Controller recorded(cc);
    cc.env.emplace_back("CPRR_CAPTURE", "off");
    cprr::Controller plain(cc);
    const ScratchDb db("cprr_bench_recording.db");
    const cprr::RunMeta meta{
        kind, {cprr::Mode::pool}, cprr::Placement::best_fit, worker, {}, cprr::kProtocolVersion,
        {}};
    cprr::RecordWriter writer(db.path, meta);
    const std::vector<int64_t> ids = writer.add_cases({ring, small});
    CommitTimes commits;
    std::optional<cprr::RecordQueue> queue;
    if (store_mode == "thread") {
      queue.emplace([&](const cprr::ExecutionResult& r, int64_t case_id) {
        const auto t0 = Clock::now();
        writer.write(r, case_id);
        const std::lock_guard lock(commits.mu);
        commits.ms.push_back(ms_since(t0));
      });
    }
    Bench b{recorded, plain, writer, queue ? &*queue : nullptr, commits, {}};
    std::vector<Row> rows;
    rows.push_back(measure(b, ring, runs, ids[0]));
    rows.push_back(measure(b, small, runs, ids[1]));
    queue.reset();
    writer.finish(0);
    print(rows, backend, runs, store_mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cprr_bench_recording: %s\n", e.what());
    return 2;
  }
  return 0;
}

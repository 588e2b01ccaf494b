#include "schema/record_writer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>

#include "data/text_forms.h"
#include "runtime/backend.h"
#include "runtime/error.h"
#include "runtime/host_info.h"

extern char** environ;

namespace cprr {
namespace {

std::string now_iso8601() { return iso8601_utc(std::chrono::system_clock::now()); }

std::string libraries_json(BackendKind backend, uint32_t protocol_version) {
  nlohmann::json j{{"sqlite", sqlite3_libversion()},
                   {"schema", kSchemaVersion},
                   {"protocol", protocol_version},
                   {"backend", backend_name(backend)}};
  if (backend == BackendKind::cuda) {
    for (const auto& [k, v] : device_versions()) j[k] = v;
  }
  return j.dump();
}

/// op.read_spans / op.write_spans: "0+64,128+32" (record_reader.cpp: split_spans reads it back).
/// Written into `out`, whose capacity is reused from row to row.
void join_spans(const std::vector<ByteSpan>& spans, std::string& out) {
  out.clear();
  for (const ByteSpan& s : spans) {
    fmt::format_to(std::back_inserter(out), "{}{}+{}", out.empty() ? "" : ",", s.offset, s.bytes);
  }
}

/// op.reads / op.writes: "1,2,3" (record_reader.cpp: split_ids reads it back).
void join_ids(const std::vector<uint32_t>& ids, std::string& out) {
  out.clear();
  for (uint32_t id : ids)
    fmt::format_to(std::back_inserter(out), "{}{}", out.empty() ? "" : ",", id);
}

/// capture.shape: a JSON array of integers, "[2,512]", as nlohmann::json writes it.
void shape_json(const std::vector<int64_t>& shape, std::string& out) {
  out.clear();
  fmt::format_to(std::back_inserter(out), "[{}]", fmt::join(shape, ","));
}

/// rank_result.watchdog (record_reader.cpp: read_watchdog reads it back). The execution id is left
/// out: it is the controller's numbering, and the row already names the execution.
std::string watchdog_json(const WatchdogStatus& w) {
  return nlohmann::json{{"phase", w.phase},
                        {"entered_seq", w.entered_seq},
                        {"entered_kind", w.entered_kind},
                        {"completed_seq", w.completed_seq},
                        {"completed_kind", w.completed_kind},
                        {"running", w.running}}
      .dump();
}

void bind_optional(Statement& st, int index, const std::optional<std::string>& text) {
  if (text)
    st.bind(index, *text);
  else
    st.bind_null(index);
}

}  // namespace

struct RecordWriter::Statements {
  explicit Statements(const Database& db)
      : execution(db,
                  "INSERT INTO execution (run_id, case_id, mode, world_id, pool_position, "
                  "attempt, status, as_expected, summary, started_at, wall_ms, startup_ms, "
                  "symmetric_pool, collectives, rank_gpus, devices, master_port) "
                  "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        rank(db,
             "INSERT INTO rank_result (execution_id, rank, outcome, error, signal, exit_code, "
             "protocol_error, watchdog, stdout_tail, stderr_tail, reset_ms, body_ms) "
             "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"),
        capture(db,
                "INSERT INTO capture (execution_id, rank, kind, seq, name, dtype, shape, bytes, "
                "stream, hash, chunk_hashes, raw) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"),
        alloc(db,
              "INSERT INTO alloc_event (execution_id, rank, seq, is_free, buffer, name, pool, "
              "bytes, offset, stream) VALUES (?,?,?,?,?,?,?,?,?,?)"),
        op(db,
           "INSERT INTO op (execution_id, rank, seq, stream, kind, name, reads, writes, event, "
           "read_spans, write_spans, peer, epoch, moves, touches, touch_spans, probed) "
           "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        collective(db,
                   "INSERT INTO collective (execution_id, rank, seq, kind, stream, dtype, bytes, "
                   "root, op, position, group_id, members, peer, site, send_bytes, recv_bytes, "
                   "row_bytes) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
        group(db,
              "INSERT INTO process_group (execution_id, rank, id, ranks, backend, name) "
              "VALUES (?,?,?,?,?,?)") {}
  Statement execution, rank, capture, alloc, op, collective, group;
  std::string text[6];  // scratch for joined columns, bound without copying until run()
};

RecordWriter::~RecordWriter() = default;

std::string relevant_environment_json() {
  nlohmann::json j = nlohmann::json::object();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv(*e);
    const auto eq = kv.find('=');
    const std::string key = kv.substr(0, eq);
    for (const char* prefix : {"CPRR_", "NCCL_", "CUDA_", "OMP_", "GLOO_"}) {
      if (key.rfind(prefix, 0) == 0 && eq != std::string::npos) j[key] = kv.substr(eq + 1);
    }
  }
  return j.dump();
}

std::string new_run_uid() {
  std::random_device rd;  // the system's entropy: two CI jobs started at once still differ
  std::string out;
  for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", rd());
  return out;
}

std::string launch_json(const LaunchOptions& o) {
  return nlohmann::json{{"kind", launcher_name(o.kind)},
                        {"program", o.program},
                        {"hosts", o.hosts},
                        {"partition", o.partition},
                        {"gpus_per_node", o.gpus_per_node},
                        {"extra", o.extra},
                        {"listen", o.listen},
                        {"advertise", o.advertise},
                        {"shared_dir", o.shared_dir}}
      .dump();
}

RecordWriter::RecordWriter(const std::string& path, const RunMeta& meta)
    : db_(Database::open(path, Database::Mode::read_write)) {
  Transaction tx(db_);
  Statement st(db_,
               "INSERT INTO run (started_at, tool_version, host, backend, mode, placement, worker, "
               "argv, libraries, environment, shuffle_seed, launcher, worker_args, code, uid, "
               "shard, plan_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  st.bind(1, now_iso8601()).bind(2, std::string_view(CPRR_VERSION)).bind(3, host_name());
  st.bind(4, backend_name(meta.backend))
      .bind(5, modes_name(meta.modes))
      .bind(6, placement_name(meta.placement))
      .bind(7, meta.worker);
  st.bind(8, nlohmann::json(meta.argv).dump())
      .bind(9, libraries_json(meta.backend, meta.protocol_version));
  st.bind(10, relevant_environment_json());
  if (meta.shuffle_seed) st.bind(11, static_cast<int64_t>(*meta.shuffle_seed));
  if (meta.launch.kind != LauncherKind::local) st.bind(12, launch_json(meta.launch));
  st.bind(13, nlohmann::json(meta.worker_args).dump());
  nlohmann::json code = nlohmann::json::array();
  for (const CodeFile& f : meta.code) code.push_back({{"path", f.path}, {"xxh3", f.xxh3}});
  st.bind(14, code.dump()).bind(15, new_run_uid()).bind(16, meta.shard).bind(17, meta.plan_hash);
  st.run();
  run_id_ = db_.last_insert_id();
  tx.commit();
  st_ = std::make_unique<Statements>(db_);
}

std::vector<int64_t> RecordWriter::add_cases(const std::vector<CaseInstance>& plan) {
  Transaction tx(db_);
  Statement st(db_,
               "INSERT INTO test_case (run_id, plan_id, name, label, params, world_size, seed, "
               "expect, timeout_s, seeded_bug) VALUES (?,?,?,?,?,?,?,?,?,?)");
  std::vector<int64_t> ids;
  for (const CaseInstance& inst : plan) {
    CPRR_CHECK(inst.seed <= kMaxSeed, "case {}: seed {} is above 2^53 (data/case_info.h: kMaxSeed)",
               inst.label(), inst.seed);
    st.bind(1, run_id_).bind(2, int64_t{inst.id}).bind(3, inst.info.name).bind(4, inst.label());
    st.bind(5, nlohmann::json(inst.params).dump()).bind(6, int64_t{inst.world_size});
    st.bind(7, static_cast<int64_t>(inst.seed)).bind(8, expect_name(inst.info.options.expect));
    st.bind(9, inst.info.options.timeout_s).bind(10, inst.info.options.seeded_bug);
    st.run();
    ids.push_back(db_.last_insert_id());
  }
  tx.commit();
  return ids;
}

int64_t RecordWriter::write(const ExecutionResult& r, int64_t case_id) {
  Transaction tx(db_);
  Statement& st = st_->execution;
  st.bind(1, run_id_).bind(2, case_id).bind(3, mode_name(r.mode));
  st.bind(4, static_cast<int64_t>(r.world_id)).bind(5, static_cast<int64_t>(r.pool_position));
  st.bind(6, int64_t{r.attempt}).bind(7, status_name(r.status)).bind(8, int64_t{r.as_expected});
  st.bind(9, r.note.empty() ? r.summary : r.summary + (r.summary.empty() ? "" : "; ") + r.note);
  st.bind(10, iso8601_utc(r.started_at)).bind(11, r.wall_ms).bind(12, r.startup_ms);
  st.bind(13, r.symmetric_pool).bind(14, r.collectives).bind(15, r.rank_gpus);
  st.bind(16, r.devices).bind(17, int64_t{r.master_port});
  st.run();
  const int64_t execution = db_.last_insert_id();
  for (std::size_t rank = 0; rank < r.ranks.size(); ++rank) {
    write_rank(execution, static_cast<int>(rank), r.ranks[rank]);
  }
  tx.commit();
  return execution;
}

void RecordWriter::write_rank(int64_t execution, int rank, const RankReport& rep) {
  Statement& st = st_->rank;
  st.bind(1, execution).bind(2, int64_t{rank}).bind(3, report_outcome_name(rep));
  st.bind_view(4, rep.done ? std::string_view(rep.done->error) : std::string_view());
  if (rep.exit && rep.exit->signal != 0)
    st.bind(5, int64_t{rep.exit->signal});
  else
    st.bind_null(5);
  if (rep.exit && rep.exit->signal == 0)
    st.bind(6, int64_t{rep.exit->exit_code});
  else
    st.bind_null(6);
  st.bind_view(7, rep.protocol_error);
  bind_optional(st, 8, rep.watchdog ? std::optional(watchdog_json(*rep.watchdog)) : std::nullopt);
  st.bind_blob_view(9, rep.stdout_tail.data(), rep.stdout_tail.size());
  st.bind_blob_view(10, rep.stderr_tail.data(), rep.stderr_tail.size());
  st.bind(11, rep.done ? rep.done->reset_ms : 0.0).bind(12, rep.done ? rep.done->body_ms : 0.0);
  st.run();
  if (!rep.done) {
    write_collectives(execution, rank, rep.entered);  // its flight record
    return;
  }
  for (const Capture& c : rep.done->capture.probes) write_capture(execution, rank, kProbeKind, c);
  for (const Capture& c : rep.done->capture.outputs) write_capture(execution, rank, kOutputKind, c);
  write_logs(execution, rank, rep.done->capture);
}

// Binds the record's own bytes without copying (bind_view): they outlive run().
void RecordWriter::write_capture(int64_t execution, int rank, std::string_view kind,
                                 const Capture& c) {
  Statement& st = st_->capture;
  std::string& shape = st_->text[0];
  shape_json(c.shape, shape);
  st.bind(1, execution).bind(2, int64_t{rank}).bind_view(3, kind);
  st.bind(4, int64_t{c.seq}).bind_view(5, c.name).bind_view(6, dtype_name(c.dtype));
  st.bind_view(7, shape).bind(8, static_cast<int64_t>(c.bytes));
  st.bind(9, int64_t{c.stream}).bind_u64(10, c.digest.whole);
  st.bind_blob_view(11, c.digest.chunks.data(), c.digest.chunks.size() * sizeof(uint64_t));
  if (c.bytes <= kRawCaptureLimit)
    st.bind_blob_view(12, c.raw.data(), c.raw.size());
  else
    st.bind_null(12);
  st.run();
}

void RecordWriter::write_logs(int64_t execution, int rank, const CaseCapture& cap) {
  Statement& alloc = st_->alloc;
  for (const AllocRecord& a : cap.allocs) {
    alloc.bind(1, execution).bind(2, int64_t{rank}).bind(3, static_cast<int64_t>(a.seq));
    alloc.bind(4, int64_t{a.is_free}).bind(5, int64_t{a.buffer}).bind_view(6, a.name);
    alloc.bind_view(7, a.pool).bind(8, static_cast<int64_t>(a.bytes));
    alloc.bind(9, static_cast<int64_t>(a.offset)).bind(10, int64_t{a.stream});
    alloc.run();
  }
  Statement& op = st_->op;
  std::string(&text)[6] = st_->text;
  for (const OpRecord& o : cap.ops) {
    join_ids(o.reads, text[0]);
    join_ids(o.writes, text[1]);
    join_spans(o.read_spans, text[2]);
    join_spans(o.write_spans, text[3]);
    join_ids(o.touches, text[4]);
    join_spans(o.touch_spans, text[5]);
    op.bind(1, execution).bind(2, int64_t{rank}).bind(3, static_cast<int64_t>(o.seq));
    op.bind(4, int64_t{o.stream}).bind_view(5, o.kind).bind_view(6, o.name);
    op.bind_view(7, text[0]).bind_view(8, text[1]).bind(9, o.event);
    op.bind_view(10, text[2]).bind_view(11, text[3]).bind(12, int64_t{o.peer});
    op.bind(13, static_cast<int64_t>(o.epoch)).bind(14, int64_t{o.moves});
    op.bind_view(15, text[4]).bind_view(16, text[5]).bind(17, int64_t{o.probed});
    op.run();
  }
  write_collectives(execution, rank, cap.collectives);
  Statement& group = st_->group;
  for (const GroupRecord& g : cap.groups) {
    text[0] = fmt::format("{}", fmt::join(g.ranks, ","));
    group.bind(1, execution).bind(2, int64_t{rank}).bind(3, int64_t{g.id});
    group.bind_view(4, text[0]).bind_view(5, g.backend).bind_view(6, g.name);
    group.run();
  }
}

void RecordWriter::write_collectives(int64_t execution, int rank,
                                     const std::vector<CollectiveRecord>& collectives) {
  Statement& coll = st_->collective;
  for (std::size_t i = 0; i < collectives.size(); ++i) {
    const CollectiveRecord& c = collectives[i];
    coll.bind(1, execution).bind(2, int64_t{rank}).bind(3, static_cast<int64_t>(c.seq));
    coll.bind_view(4, c.kind).bind(5, int64_t{c.stream}).bind_view(6, dtype_name(c.dtype));
    coll.bind(7, static_cast<int64_t>(c.bytes)).bind(8, int64_t{c.root});
    coll.bind_view(9, c.kind == "all_reduce" ? reduce_op_name(c.op) : std::string_view());
    coll.bind(10, static_cast<int64_t>(i)).bind(11, int64_t{c.group}).bind_u64(12, c.members);
    coll.bind(13, int64_t{c.peer}).bind_view(14, c.where);
    std::string(&text)[6] = st_->text;
    text[0] = fmt::format("{}", fmt::join(c.send_bytes, ","));
    text[1] = fmt::format("{}", fmt::join(c.recv_bytes, ","));
    coll.bind_view(15, text[0]).bind_view(16, text[1]).bind_u64(17, c.row_bytes);
    coll.run();
  }
}

void RecordWriter::judge_cases(const std::vector<CaseJudgement>& judgements) {
  Transaction tx(db_);
  Statement st(db_,
               "UPDATE test_case SET verdict = ?, as_expected = ?, fresh_vs_pool = ? "
               "WHERE id = ? AND run_id = ?");
  for (const CaseJudgement& j : judgements) {
    bind_optional(st, 1, j.verdict);
    st.bind(2, int64_t{j.as_expected});
    bind_optional(st, 3, j.fresh_vs_pool);
    st.bind(4, j.case_id).bind(5, run_id_);
    st.run();
    CPRR_CHECK(db_.changes() == 1, "{}: judge_cases: case {} is not a case of run {}", db_.path(),
               j.case_id, run_id_);
  }
  tx.commit();
}

void RecordWriter::finish(int exit_code, const std::optional<std::string>& stopped) {
  Transaction tx(db_);
  Statement st(db_, "UPDATE run SET finished_at = ?, exit_code = ?, stopped = ? WHERE id = ?");
  st.bind(1, now_iso8601()).bind(2, int64_t{exit_code});
  bind_optional(st, 3, stopped);
  st.bind(4, run_id_);
  st.run();
  tx.commit();
}

}  // namespace cprr

#include "schema/record_reader.h"

#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>

#include "data/text_forms.h"
#include "runtime/error.h"
#include "runtime/host_info.h"

namespace cprr {
namespace {

/// The schema version that added op.read_spans and write_spans.
constexpr int kSpansVersion = 3;
/// The schema version that added op.peer and op.epoch.
constexpr int kOneSidedVersion = 4;
/// The schema version that added run.stopped.
constexpr int kStoppedVersion = 7;
/// The schema version that added run.shuffle_seed.
constexpr int kShuffleVersion = 8;
/// The schema version that added run.launcher.
constexpr int kLauncherVersion = 9;
/// The version that added run.worker_args.
constexpr int kWorkerArgsVersion = 11;
/// The version that added run.code.
constexpr int kCodeVersion = 12;
/// The version that added the merge's run columns and execution.devices.
constexpr int kMergeVersion = 17;
/// The version that added execution.master_port.
constexpr int kPortVersion = 18;
/// The version that added collective groups and messages (collective.position, group_id,
/// members, peer, site; process_group).
constexpr int kGroupsVersion = 13;
/// The version that added op.moves.
constexpr int kMovesVersion = 14;
/// The version that added op.touches and touch_spans.
constexpr int kTouchesVersion = 15;
/// The version that added op.probed.
constexpr int kProbedVersion = 16;
/// The schema version that added collective.op and execution.symmetric_pool.
constexpr int kVersion5 = 5;
/// The schema version that added execution.collectives and rank_gpus.
constexpr int kTransportVersion = 10;
/// An older file's collectives and rank_gpus, as the migration to 10 fills them: a cuda world had
/// a GPU per rank and NCCL, a cpu world Gloo.
constexpr const char* kOlderCollectives =
    "CASE WHEN e.world_id = 0 THEN '' WHEN (SELECT backend FROM run WHERE run.id = e.run_id) = "
    "'cuda' THEN 'nccl' ELSE 'gloo' END, ''";
/// The schema version that added test_case.verdict, as_expected and fresh_vs_pool.
constexpr int kJudgementVersion = 2;

/// The test_case columns read_case takes. An older file has no judgement columns: they read as
/// NULL, which is the truth (its cases were never judged).
std::string case_columns(int schema_version) {
  return fmt::format(
      "c.id, c.run_id, c.plan_id, c.name, c.params, c.world_size, c.seed, c.expect, c.timeout_s, "
      "c.seeded_bug, {}",
      schema_version >= kJudgementVersion ? "c.verdict, c.as_expected, c.fresh_vs_pool"
                                          : "NULL, NULL, NULL");
}

/// Parses a stored text form with its one parser (text_forms.h, dtype.h). Text that no cprr writes
/// is refused, naming it, rather than read as some default.
template <class Parse>
auto parse_known(Parse parse, const std::string& text, std::string_view what,
                 std::string_view path) {
  const auto value = parse(text);
  if (!value) CPRR_THROW("{}: unknown {} '{}' in the database", path, what, text);
  return *value;
}

DType dtype_of(const std::string& text, std::string_view path) {
  return parse_known([](std::string_view s) { return parse_dtype(s); }, text, "dtype", path);
}

std::optional<std::string> optional_text(const Statement& st, int column) {
  return st.is_null(column) ? std::nullopt : std::optional(st.text(column));
}

/// Runs a prepared per-execution query: binds the id, hands every row to `row`, and rewinds the
/// statement afterwards (also when `row` throws), so it holds no read snapshot between uses.
template <class Row>
void for_each_row(Statement& st, int64_t id, Row&& row) {
  struct Rewind {
    Statement& st;
    ~Rewind() { st.reset(); }
  } rewind{st};
  st.reset();
  st.bind(1, id);
  while (st.step()) row(st);
}

/// The capture a row of `table` adds to: the writer stores captures and logs only for ranks that
/// reported a result.
CaseCapture& capture_of(std::vector<RankReport>& ranks, int64_t rank, std::string_view table,
                        int64_t execution, std::string_view path) {
  if (rank < 0 || rank >= static_cast<int64_t>(ranks.size()) ||
      !ranks[static_cast<std::size_t>(rank)].done) {
    CPRR_THROW("{}: {} row of execution {} for rank {}, which has no result", path, table,
               execution, rank);
  }
  return ranks[static_cast<std::size_t>(rank)].done->capture;
}

/// op.reads / op.writes: the inverse of record_writer.cpp's join_ids ("1,2,3"; "" is none).
std::vector<uint32_t> split_ids(const std::string& text, std::string_view path) {
  std::vector<uint32_t> ids;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    uint32_t id = 0;
    const auto [end, ec] = std::from_chars(text.data() + begin, text.data() + comma, id);
    if (comma == begin || ec != std::errc() || end != text.data() + comma ||
        comma + 1 == text.size()) {
      CPRR_THROW("{}: op buffer list '{}' is not comma-separated buffer ids", path, text);
    }
    ids.push_back(id);
    begin = comma + 1;
  }
  return ids;
}

/// rank_result.watchdog: the inverse of record_writer.cpp's watchdog_json. The JSON has no
/// execution id (the controller's numbering); a busy watchdog spoke of the row's execution.
WatchdogStatus read_watchdog(const std::string& text, int64_t execution, std::string_view path) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    WatchdogStatus w;
    w.phase = j.at("phase").get<std::string>();
    w.execution = w.phase == "idle" ? 0 : static_cast<uint64_t>(execution);
    w.entered_seq = j.at("entered_seq").get<int64_t>();
    w.entered_kind = j.at("entered_kind").get<std::string>();
    w.completed_seq = j.at("completed_seq").get<int64_t>();
    w.completed_kind = j.at("completed_kind").get<std::string>();
    w.running = j.at("running").get<std::vector<std::string>>();
    return w;
  } catch (const nlohmann::json::exception& e) {
    CPRR_THROW("{}: the watchdog answer of execution {} is not what cprr writes ({}): {}", path,
               execution, e.what(), text);
  }
}

/// One test_case row (case_columns order).
RecordedCase read_case(const Statement& st, std::string_view path) {
  RecordedCase c;
  c.id = st.int64(0);
  c.run_id = st.int64(1);
  CaseInstance& inst = c.instance;
  inst.id = static_cast<uint32_t>(st.int64(2));
  inst.info.name = st.text(3);
  inst.params = nlohmann::json::parse(st.text(4)).get<Params>();
  inst.world_size = static_cast<int>(st.int64(5));
  inst.info.options.world_sizes = {inst.world_size};
  inst.seed = st.u64(6);
  inst.info.options.expect = parse_known(parse_expect, st.text(7), "expectation", path);
  inst.info.options.timeout_s = st.real(8);
  inst.info.options.seeded_bug = st.text(9);
  if (!st.is_null(11)) {  // as_expected: NULL until the run judged its cases
    c.judgement =
        CaseJudgement{c.id, optional_text(st, 10), st.int64(11) != 0, optional_text(st, 12)};
  }
  return c;
}

/// One execution row joined with its case (Statements::executions).
RecordedExecution read_execution(const Statement& st, int64_t case_id, std::string_view path) {
  RecordedExecution e;
  e.id = st.int64(0);
  e.case_id = case_id;
  ExecutionResult& r = e.result;
  r.id = static_cast<uint64_t>(e.id);
  r.mode = parse_known(parse_mode, st.text(1), "execution mode", path);
  r.world_id = st.u64(2);
  r.pool_position = st.u64(3);
  r.attempt = static_cast<int>(st.int64(4));
  r.status = parse_known(parse_status, st.text(5), "execution status", path);
  r.as_expected = st.int64(6) != 0;
  r.summary = st.text(7);
  r.started_at = parse_known(parse_iso8601_utc, st.text(8), "execution start time", path);
  r.wall_ms = st.real(9);
  r.startup_ms = st.real(10);
  r.case_id = static_cast<uint32_t>(st.int64(11));
  r.label = st.text(12);
  r.symmetric_pool = st.text(13);
  r.collectives = st.text(14);
  r.rank_gpus = st.text(15);
  r.devices = st.text(16);
  r.master_port = static_cast<int>(st.int64(17));
  return e;
}

/// One rank_result row. Its outcome text must fit the rest of the row: "died" needs a signal or
/// an exit code, "no_result" neither (text_forms.h: report_outcome_name).
RankReport read_rank(const Statement& st, int64_t execution, std::string_view path) {
  RankReport rep;
  const std::string outcome = st.text(1);
  if (const auto o = parse_outcome(outcome)) {
    rep.done =
        RankResult{static_cast<uint64_t>(execution), *o, st.text(2), st.real(9), st.real(10), {}};
  }
  if (!st.is_null(3)) rep.exit = ExitInfo{-1, static_cast<int>(st.int64(3))};
  if (!st.is_null(4)) rep.exit = ExitInfo{static_cast<int>(st.int64(4)), 0};
  rep.protocol_error = st.text(5);
  if (!st.is_null(6)) rep.watchdog = read_watchdog(st.text(6), execution, path);
  rep.stdout_tail = st.blob(7);
  rep.stderr_tail = st.blob(8);
  if (report_outcome_name(rep) != outcome) {
    CPRR_THROW("{}: rank {} of execution {}: outcome '{}' does not fit its row", path, st.int64(0),
               execution, outcome);
  }
  return rep;
}

/// One capture row (Statements::captures), from column 2 on.
Capture read_capture(const Statement& st, std::string_view path) {
  Capture c;
  c.seq = static_cast<uint32_t>(st.int64(2));
  c.name = st.text(3);
  c.dtype = dtype_of(st.text(4), path);
  c.shape = nlohmann::json::parse(st.text(5)).get<std::vector<int64_t>>();
  c.bytes = st.u64(6);
  c.stream = static_cast<int32_t>(st.int64(7));
  c.digest.whole = st.u64(8);
  const std::string chunks = st.blob(9);
  if (chunks.size() % sizeof(uint64_t) != 0) {
    CPRR_THROW("{}: capture '{}' has {} bytes of chunk hashes, not a multiple of 8", path, c.name,
               chunks.size());
  }
  c.digest.chunks.resize(chunks.size() / sizeof(uint64_t));
  if (!chunks.empty()) std::memcpy(c.digest.chunks.data(), chunks.data(), chunks.size());
  if (!st.is_null(10)) c.raw = st.blob(10);
  return c;
}

AllocRecord read_alloc(const Statement& st) {
  return AllocRecord{
      st.u64(1), st.int64(2) != 0, static_cast<uint32_t>(st.int64(3)), st.text(4), st.text(5),
      st.u64(6), st.u64(7),        static_cast<int32_t>(st.int64(8))};
}

/// op.read_spans / op.write_spans: the inverse of record_writer.cpp's join_spans ("0+64,128+32";
/// "" is none, also for rows from before spans). One span per buffer of the list, or none.
std::vector<ByteSpan> split_spans(const std::string& text, std::size_t buffers,
                                  std::string_view path) {
  std::vector<ByteSpan> spans;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::size_t plus = text.find('+', begin);
    ByteSpan s;
    bool ok = plus != std::string::npos && plus < comma && comma + 1 != text.size();
    if (ok) {
      const auto a = std::from_chars(text.data() + begin, text.data() + plus, s.offset);
      const auto b = std::from_chars(text.data() + plus + 1, text.data() + comma, s.bytes);
      ok = a.ec == std::errc() && a.ptr == text.data() + plus && b.ec == std::errc() &&
           b.ptr == text.data() + comma;
    }
    if (!ok) CPRR_THROW("{}: op span list '{}' is not comma-separated offset+bytes", path, text);
    spans.push_back(s);
    begin = comma + 1;
  }
  if (!spans.empty() && spans.size() != buffers) {
    CPRR_THROW("{}: op span list '{}' has {} spans for {} buffers", path, text, spans.size(),
               buffers);
  }
  return spans;
}

OpRecord read_op(const Statement& st, std::string_view path) {
  OpRecord op{st.u64(1),  static_cast<int32_t>(st.int64(2)), st.text(3),
              st.text(4), split_ids(st.text(5), path),       split_ids(st.text(6), path),
              st.int64(7)};
  op.read_spans = split_spans(st.text(8), op.reads.size(), path);
  op.write_spans = split_spans(st.text(9), op.writes.size(), path);
  op.peer = static_cast<int32_t>(st.int64(10));
  op.epoch = st.u64(11);
  op.moves = st.int64(12) != 0;
  op.touches = split_ids(st.text(13), path);
  op.touch_spans = split_spans(st.text(14), op.touches.size(), path);
  op.probed = st.int64(15) != 0;
  return op;
}

/// The op log query: columns a version lacks read as their defaults ('' spans: whole buffers).
std::string op_query(int version) {
  const char* spans = version >= kSpansVersion ? "read_spans, write_spans" : "'', ''";
  const char* one_sided = version >= kOneSidedVersion ? "peer, epoch" : "-1, 0";
  return fmt::format(
      "SELECT rank, seq, stream, kind, name, reads, writes, event, {}, {}, {}, {}, {} FROM op "
      "WHERE execution_id = ? ORDER BY rank, seq",
      spans, one_sided, version >= kMovesVersion ? "moves" : "0",
      version >= kTouchesVersion ? "touches, touch_spans" : "'', ''",
      version >= kProbedVersion ? "probed" : "0");
}

// A comma-separated list of numbers as the writer joins them ("" is none); `what` names the
// column in the error.
template <class T>
std::vector<T> read_list(const std::string& text, std::string_view path, std::string_view what) {
  std::vector<T> out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    T v{};
    const auto [end, ec] = std::from_chars(text.data() + at, text.data() + comma, v);
    if (ec != std::errc() || end != text.data() + comma) {
      CPRR_THROW("{}: {} '{}' is not a list of numbers", path, what, text);
    }
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

std::string collective_query(int version) {
  return fmt::format(
      "SELECT rank, seq, kind, stream, dtype, bytes, root, {}, {} FROM collective "
      "WHERE execution_id = ? ORDER BY rank, {}",
      version >= kVersion5 ? "op" : "''",
      version >= kGroupsVersion ? "group_id, members, peer, site, send_bytes, recv_bytes, row_bytes"
                                : "0, 0, -1, '', '', '', 0",
      version >= kGroupsVersion ? "position" : "seq");
}

std::string group_query(int version) {
  return version >= kGroupsVersion
             ? "SELECT rank, id, ranks, backend, name FROM process_group WHERE execution_id = ? "
               "ORDER BY rank, id"
             : "SELECT 0, 0, '', '', '' WHERE ? AND 0";
}

GroupRecord read_group(const Statement& st, std::string_view path) {
  GroupRecord g{static_cast<uint32_t>(st.int64(1)), {}, st.text(3), st.text(4)};
  g.ranks = read_list<int32_t>(st.text(2), path, "process_group.ranks");
  return g;
}

CollectiveRecord read_collective(const Statement& st, std::string_view path) {
  CollectiveRecord c{st.u64(1),
                     st.text(2),
                     static_cast<int32_t>(st.int64(3)),
                     dtype_of(st.text(4), path),
                     st.u64(5),
                     static_cast<int32_t>(st.int64(6))};
  const std::string op = st.text(7);
  if (!op.empty()) {
    const auto parsed = parse_reduce_op(op);
    if (!parsed) CPRR_THROW("{}: unknown reduce op '{}' in the collective table", path, op);
    c.op = *parsed;
  }
  c.group = static_cast<uint32_t>(st.int64(8));
  c.members = st.u64(9);
  c.peer = static_cast<int32_t>(st.int64(10));
  c.where = st.text(11);
  c.send_bytes = read_list<uint64_t>(st.text(12), path, "collective.send_bytes");
  c.recv_bytes = read_list<uint64_t>(st.text(13), path, "collective.recv_bytes");
  c.row_bytes = st.u64(14);
  return c;
}

}  // namespace

// Per-execution queries, one per table, each served by the table's primary key (execution_id
// first) in the order the rows were written.
struct RecordReader::Statements {
  explicit Statements(const Database& db)
      : executions(db, fmt::format(
                           "SELECT e.id, e.mode, e.world_id, e.pool_position, e.attempt, e.status, "
                           "e.as_expected, e.summary, e.started_at, e.wall_ms, e.startup_ms, "
                           "c.plan_id, c.label, {}, {}, {}, {} FROM execution e JOIN test_case c "
                           "ON c.id = e.case_id WHERE e.case_id = ? ORDER BY e.id",
                           db.schema_version() >= kVersion5 ? "e.symmetric_pool" : "''",
                           db.schema_version() >= kTransportVersion ? "e.collectives, e.rank_gpus"
                                                                    : kOlderCollectives,
                           db.schema_version() >= kMergeVersion ? "e.devices" : "''",
                           db.schema_version() >= kPortVersion ? "e.master_port" : "0")),
        ranks(db,
              "SELECT rank, outcome, error, signal, exit_code, protocol_error, watchdog, "
              "stdout_tail, stderr_tail, reset_ms, body_ms FROM rank_result "
              "WHERE execution_id = ? ORDER BY rank"),
        captures(db,
                 "SELECT rank, kind, seq, name, dtype, shape, bytes, stream, hash, chunk_hashes, "
                 "raw FROM capture WHERE execution_id = ? ORDER BY rank, kind, seq"),
        allocs(db,
               "SELECT rank, seq, is_free, buffer, name, pool, bytes, offset, stream "
               "FROM alloc_event WHERE execution_id = ? ORDER BY rank, seq"),
        ops(db, op_query(db.schema_version())),
        collectives(db, collective_query(db.schema_version())),
        groups(db, group_query(db.schema_version())) {}
  Statement executions, ranks, captures, allocs, ops, collectives, groups;
};

RecordReader::RecordReader(const std::string& path, std::string_view option, Database::Mode mode)
    : db_(Database::open(path, mode, option)),
      case_columns_(case_columns(db_.schema_version())),
      st_(std::make_unique<Statements>(db_)) {}

RecordReader::~RecordReader() = default;
// Statements keep only the connection handle, which a moved Database keeps too.
RecordReader::RecordReader(RecordReader&&) noexcept = default;
RecordReader& RecordReader::operator=(RecordReader&&) noexcept = default;

LaunchOptions launch_from_json(const std::string& text, int64_t run_id) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    LaunchOptions o;
    const std::string kind = j.at("kind").get<std::string>();
    const auto parsed = parse_launcher(kind);
    CPRR_CHECK(parsed.has_value(), "unknown launcher '{}'", kind);
    o.kind = *parsed;
    o.program = j.at("program").get<std::string>();
    o.hosts = j.at("hosts").get<std::vector<std::string>>();
    o.partition = j.at("partition").get<std::string>();
    o.gpus_per_node = j.at("gpus_per_node").get<int>();
    o.extra = j.at("extra").get<std::vector<std::string>>();
    o.listen = j.at("listen").get<std::string>();
    o.advertise = j.at("advertise").get<std::string>();
    o.shared_dir = j.at("shared_dir").get<std::string>();
    return o;
  } catch (const std::exception& e) {
    CPRR_THROW("run {} has an unreadable launcher record: {}", run_id, e.what());
  }
}

std::vector<RecordedRun> RecordReader::runs() const {
  Statement st(
      db_, fmt::format("SELECT id, started_at, finished_at, exit_code, backend, mode, "
                       "placement, worker, environment, tool_version, host, argv, "
                       "libraries, {}, {}, {}, {}, {}, {} FROM run ORDER BY id",
                       db_.schema_version() >= kStoppedVersion ? "stopped" : "NULL",
                       db_.schema_version() >= kShuffleVersion ? "shuffle_seed" : "NULL",
                       db_.schema_version() >= kLauncherVersion ? "launcher" : "NULL",
                       db_.schema_version() >= kWorkerArgsVersion ? "worker_args" : "'[]'",
                       db_.schema_version() >= kCodeVersion ? "code" : "'[]'",
                       db_.schema_version() >= kMergeVersion ? "uid, shard, plan_hash, merged_into"
                                                             : "'', '', '', NULL"));
  std::vector<RecordedRun> out;
  while (st.step()) {
    RecordedRun r;
    r.id = st.int64(0);
    r.started_at = st.text(1);
    r.finished_at = optional_text(st, 2);
    if (!st.is_null(3)) r.exit_code = static_cast<int>(st.int64(3));
    const std::string backend = st.text(4);
    const std::optional<BackendKind> kind = parse_backend_kind(backend);
    CPRR_CHECK(kind.has_value(),
               "run {} has backend '{}', which this cprr does not know (cpu or cuda): a newer "
               "cprr recorded it; read it with that one",
               r.id, backend);
    r.backend = *kind;
    r.mode = st.text(5);
    r.placement = st.text(6);
    r.worker = st.text(7);
    const nlohmann::json env = nlohmann::json::parse(st.text(8));  // must outlive the loop
    for (const auto& [k, v] : env.items()) r.environment.emplace_back(k, v.get<std::string>());
    r.tool_version = st.text(9);
    r.host = st.text(10);
    r.argv = nlohmann::json::parse(st.text(11)).get<std::vector<std::string>>();
    const nlohmann::json libs = nlohmann::json::parse(st.text(12));
    for (const auto& [k, v] : libs.items()) {
      r.libraries.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
    }
    r.stopped = optional_text(st, 13);
    if (!st.is_null(14)) r.shuffle_seed = static_cast<uint64_t>(st.int64(14));
    if (!st.is_null(15)) r.launch = launch_from_json(st.text(15), r.id);
    r.worker_args = nlohmann::json::parse(st.text(16)).get<std::vector<std::string>>();
    for (const nlohmann::json& f : nlohmann::json::parse(st.text(17))) {
      r.code.push_back(CodeFile{f.at("path").get<std::string>(), f.at("xxh3").get<std::string>()});
    }
    r.uid = st.text(18);
    r.shard = st.text(19);
    r.plan_hash = st.text(20);
    if (!st.is_null(21)) r.merged_into = st.int64(21);
    out.push_back(std::move(r));
  }
  return out;
}

RecordedRun RecordReader::run(int64_t id) const {
  for (RecordedRun& r : runs()) {
    if (r.id == id) return std::move(r);
  }
  CPRR_THROW("run {} is missing from {}", id, db_.path());
}

RecordedRun RecordReader::latest_run(const char* what) const {
  std::vector<RecordedRun> all = runs();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (!it->merged_into) return std::move(*it);
  }
  CPRR_THROW_AS(UsageError, "{}: {} holds no run; record one first", what, db_.path());
}

std::map<std::string, double> RecordReader::case_wall_ms(int64_t run_id) const {
  Statement st(db_,
               "SELECT c.label, sum(e.wall_ms) FROM test_case c JOIN execution e ON e.case_id = "
               "c.id WHERE c.run_id = ? GROUP BY c.label");
  st.bind(1, run_id);
  std::map<std::string, double> out;
  while (st.step()) out[st.text(0)] = st.real(1);
  return out;
}

std::vector<RecordedCase> RecordReader::cases() const {
  Statement st(db_, fmt::format("SELECT {} FROM test_case c ORDER BY c.id", case_columns_));
  std::vector<RecordedCase> out;
  while (st.step()) out.push_back(read_case(st, db_.path()));
  return out;
}

RecordedCase RecordReader::find_case(int64_t id) const {
  Statement st(db_, fmt::format("SELECT {} FROM test_case c WHERE c.id = ?", case_columns_));
  st.bind(1, id);
  if (!st.step()) {
    CPRR_THROW_AS(UsageError, "--case {}: no such case in {}; cpreplay --list shows the cases", id,
                  db_.path());
  }
  return read_case(st, db_.path());
}

std::vector<RecordedExecution> RecordReader::executions(int64_t case_id, Detail detail) const {
  std::vector<RecordedExecution> out;
  for_each_row(st_->executions, case_id, [&](const Statement& st) {
    RecordedExecution e = read_execution(st, case_id, db_.path());
    read_ranks(e.id, e.result, detail);
    out.push_back(std::move(e));
  });
  return out;
}

void RecordReader::read_ranks(int64_t execution, ExecutionResult& result, Detail detail) const {
  for_each_row(st_->ranks, execution, [&](const Statement& st) {
    if (st.int64(0) != static_cast<int64_t>(result.ranks.size())) {
      CPRR_THROW("{}: execution {} has no rank_result row for rank {}", db_.path(), execution,
                 result.ranks.size());
    }
    result.ranks.push_back(read_rank(st, execution, db_.path()));
  });
  read_captures(execution, result.ranks);
  if (detail == Detail::logs) read_logs(execution, result.ranks);
}

void RecordReader::read_captures(int64_t execution, std::vector<RankReport>& ranks) const {
  for_each_row(st_->captures, execution, [&](const Statement& st) {
    CaseCapture& cap = capture_of(ranks, st.int64(0), "capture", execution, db_.path());
    const std::string kind = st.text(1);
    if (kind != kProbeKind && kind != kOutputKind) {
      CPRR_THROW("{}: unknown capture kind '{}' in the database", db_.path(), kind);
    }
    (kind == kProbeKind ? cap.probes : cap.outputs).push_back(read_capture(st, db_.path()));
  });
}

void RecordReader::read_logs(int64_t execution, std::vector<RankReport>& ranks) const {
  const std::string& path = db_.path();
  for_each_row(st_->allocs, execution, [&](const Statement& st) {
    capture_of(ranks, st.int64(0), "alloc_event", execution, path).allocs.push_back(read_alloc(st));
  });
  for_each_row(st_->ops, execution, [&](const Statement& st) {
    capture_of(ranks, st.int64(0), "op", execution, path).ops.push_back(read_op(st, path));
  });
  for_each_row(st_->collectives, execution, [&](const Statement& st) {
    // A rank without a result has its flight record here (what it entered before it stopped).
    const int64_t rank = st.int64(0);
    if (rank >= 0 && rank < static_cast<int64_t>(ranks.size()) &&
        !ranks[static_cast<std::size_t>(rank)].done) {
      ranks[static_cast<std::size_t>(rank)].entered.push_back(read_collective(st, path));
    } else {
      capture_of(ranks, rank, "collective", execution, path)
          .collectives.push_back(read_collective(st, path));
    }
  });
  for_each_row(st_->groups, execution, [&](const Statement& st) {
    capture_of(ranks, st.int64(0), "process_group", execution, path)
        .groups.push_back(read_group(st, path));
  });
}

std::vector<RecordedCase> RecordReader::predecessors(const RecordedExecution& execution) const {
  if (execution.result.mode != Mode::pool) return {};
  Statement st(db_,
               fmt::format("SELECT {} FROM execution p JOIN execution e ON e.id = ? "
                           "JOIN test_case c ON c.id = p.case_id "
                           "WHERE p.run_id = e.run_id AND p.world_id = e.world_id AND p.mode = ? "
                           "AND p.pool_position < e.pool_position ORDER BY p.pool_position",
                           case_columns_));
  st.bind(1, execution.id).bind(2, mode_name(Mode::pool));
  std::vector<RecordedCase> out;
  while (st.step()) out.push_back(read_case(st, db_.path()));
  return out;
}

}  // namespace cprr

#include "schema/record_reader.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "recorder/data/text_forms.h"
#include "runtime/error.h"

namespace cprr {
namespace {

constexpr const char* kCaseColumns =
    "c.id, c.run_id, c.plan_id, c.name, c.params, c.world_size, c.seed, c.expect, c.timeout_s, "
    "c.seeded_bug";

ExecStatus status_of(const std::string& s) {
  if (const auto st = parse_status(s)) return *st;
  CPRR_THROW("unknown execution status '{}' in the database", s);
}

Capture read_capture(const Statement& st) {
  Capture c;
  c.seq = static_cast<uint32_t>(st.int64(2));
  c.name = st.text(3);
  c.dtype = parse_dtype(st.text(4)).value_or(DType::u8);
  c.shape = nlohmann::json::parse(st.text(5)).get<std::vector<int64_t>>();
  c.bytes = static_cast<uint64_t>(st.int64(6));
  c.stream = static_cast<int32_t>(st.int64(7));
  c.digest.whole = st.u64(8);
  const std::string chunks = st.blob(9);
  c.digest.chunks.resize(chunks.size() / sizeof(uint64_t));
  std::memcpy(c.digest.chunks.data(), chunks.data(), c.digest.chunks.size() * sizeof(uint64_t));
  if (!st.is_null(10)) c.raw = st.blob(10);
  return c;
}

}  // namespace

RecordReader::RecordReader(const std::string& path)
    : db_(Database::open(path, Database::Mode::read_only)) {}

std::vector<RecordedRun> RecordReader::runs() const {
  Statement st(db_,
               "SELECT id, started_at, finished_at, exit_code, backend, mode, placement, worker, "
               "environment FROM run ORDER BY id");
  std::vector<RecordedRun> out;
  while (st.step()) {
    RecordedRun r;
    r.id = st.int64(0);
    r.started_at = st.text(1);
    if (!st.is_null(2)) r.finished_at = st.text(2);
    if (!st.is_null(3)) r.exit_code = static_cast<int>(st.int64(3));
    r.backend = st.text(4);
    r.mode = st.text(5);
    r.placement = st.text(6);
    r.worker = st.text(7);
    const nlohmann::json env = nlohmann::json::parse(st.text(8));  // must outlive the loop
    for (const auto& [k, v] : env.items()) r.environment.emplace_back(k, v.get<std::string>());
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

RecordedCase RecordReader::read_case(const Statement& st) const {
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
  inst.info.options.expect = parse_expect(st.text(7)).value_or(Expect::pass);
  inst.info.options.timeout_s = st.real(8);
  inst.info.options.seeded_bug = st.text(9);
  return c;
}

std::vector<RecordedCase> RecordReader::cases() const {
  Statement st(db_, fmt::format("SELECT {} FROM test_case c ORDER BY c.id", kCaseColumns));
  std::vector<RecordedCase> out;
  while (st.step()) out.push_back(read_case(st));
  return out;
}

RecordedCase RecordReader::find_case(int64_t id) const {
  Statement st(db_, fmt::format("SELECT {} FROM test_case c WHERE c.id = ?", kCaseColumns));
  st.bind(1, id);
  if (!st.step()) {
    CPRR_THROW_AS(UsageError, "--case {}: no such case in {}; cpreplay --list shows the cases", id,
                  db_.path());
  }
  return read_case(st);
}

std::vector<RecordedExecution> RecordReader::executions(int64_t case_id) const {
  Statement st(db_,
               "SELECT id, mode, world_id, pool_position, attempt, status, as_expected, summary, "
               "wall_ms, startup_ms FROM execution WHERE case_id = ? ORDER BY id");
  st.bind(1, case_id);
  std::vector<RecordedExecution> out;
  while (st.step()) {
    RecordedExecution e;
    e.id = st.int64(0);
    e.case_id = case_id;
    ExecutionResult& r = e.result;
    r.id = static_cast<uint64_t>(e.id);
    r.mode = parse_mode(st.text(1)).value_or(Mode::pool);
    r.world_id = st.u64(2);
    r.pool_position = st.u64(3);
    r.attempt = static_cast<int>(st.int64(4));
    r.status = status_of(st.text(5));
    r.as_expected = st.int64(6) != 0;
    r.summary = st.text(7);
    r.wall_ms = st.real(8);
    r.startup_ms = st.real(9);
    read_ranks(e.id, r);
    out.push_back(std::move(e));
  }
  return out;
}

void RecordReader::read_ranks(int64_t execution, ExecutionResult& result) const {
  Statement st(db_,
               "SELECT rank, outcome, error, signal, exit_code, protocol_error, stdout_tail, "
               "stderr_tail, reset_ms, body_ms FROM rank_result WHERE execution_id = ? "
               "ORDER BY rank");
  st.bind(1, execution);
  while (st.step()) {
    RankReport rep;
    if (auto outcome = parse_outcome(st.text(1))) {
      rep.done = RankResult{static_cast<uint64_t>(execution), *outcome, st.text(2), st.real(8),
                          st.real(9), {}};
    }
    if (!st.is_null(3)) rep.exit = ExitInfo{-1, static_cast<int>(st.int64(3))};
    if (!st.is_null(4)) rep.exit = ExitInfo{static_cast<int>(st.int64(4)), 0};
    rep.protocol_error = st.text(5);
    rep.stdout_tail = st.blob(6);
    rep.stderr_tail = st.blob(7);
    result.ranks.push_back(std::move(rep));
  }
  read_captures(execution, result.ranks);
}

void RecordReader::read_captures(int64_t execution, std::vector<RankReport>& ranks) const {
  Statement st(db_,
               "SELECT rank, kind, seq, name, dtype, shape, bytes, stream, hash, chunk_hashes, "
               "raw FROM capture WHERE execution_id = ? ORDER BY rank, kind, seq");
  st.bind(1, execution);
  while (st.step()) {
    const auto rank = static_cast<std::size_t>(st.int64(0));
    if (rank >= ranks.size() || !ranks[rank].done) continue;
    CaseCapture& cap = ranks[rank].done->capture;
    (st.text(1) == "probe" ? cap.probes : cap.outputs).push_back(read_capture(st));
  }
}

std::vector<RecordedCase> RecordReader::predecessors(const RecordedExecution& execution) const {
  if (execution.result.mode != Mode::pool) return {};
  Statement st(db_, fmt::format(
                        "SELECT {} FROM execution p JOIN execution e ON e.id = ? "
                        "JOIN test_case c ON c.id = p.case_id "
                        "WHERE p.run_id = e.run_id AND p.world_id = e.world_id AND p.mode = 'pool' "
                        "AND p.pool_position < e.pool_position ORDER BY p.pool_position",
                        kCaseColumns));
  st.bind(1, execution.id);
  std::vector<RecordedCase> out;
  while (st.step()) out.push_back(read_case(st));
  return out;
}

}  // namespace cprr

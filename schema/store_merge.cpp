#include "schema/store_merge.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "data/shard.h"
#include "runtime/error.h"
#include "runtime/host_info.h"
#include "schema/record_reader.h"
#include "schema/record_writer.h"
#include "schema/store.h"

namespace cprr {
namespace {

// One run to be in the merged one: an input's latest run, or a shard the file already holds.
struct Source {
  std::string path;
  RecordedRun run;
  Shard part;
  std::set<std::string> labels;
  bool already = false;
};

// What merge_runs reports of a shard; its run in the merged file comes once it is known.
MergedShard entry_of(const Source& s, bool already) {
  return MergedShard{s.path,
                     s.run.id,
                     0,
                     shard_text(Shard{s.part.index, s.part.count}),
                     static_cast<int64_t>(s.labels.size()),
                     already};
}

std::string name_of(const Source& s) {
  return fmt::format("{} run {} (shard {}/{})", s.path, s.run.id, s.part.index, s.part.count);
}

// A shard's cases: its own rows, or for a shard already merged (its cases are the merged run's)
// those its executions ran.
std::set<std::string> labels_of(const Database& db, int64_t run) {
  Statement st(db,
               "SELECT label FROM test_case WHERE run_id = ?1 UNION SELECT c.label FROM "
               "test_case c JOIN execution e ON e.case_id = c.id WHERE e.run_id = ?1");
  st.bind(1, run);
  std::set<std::string> out;
  while (st.step()) out.insert(st.text(0));
  return out;
}

Source source_of(const std::string& path, RecordedRun run, const Database& db) {
  Source s{path, std::move(run), {}, {}, false};
  const std::optional<Shard> part = shard_of_run(s.run.shard);
  CPRR_CHECK(part.has_value(), "{} run {}: run.shard '{}' is not I/N", path, s.run.id, s.run.shard);
  s.part = *part;
  s.labels = labels_of(db, s.run.id);
  return s;
}

Source read_input(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    CPRR_THROW_AS(UsageError, "--merge {}: no such file; pass the databases the shards wrote",
                  path);
  }
  // Read without writing beside it: shards may lie in a read-only folder (CI's artifacts).
  const Database db = Database::open(path, Database::Mode::read_finished, "--merge");
  if (db.schema_version() != kSchemaVersion) {
    CPRR_THROW_AS(UsageError,
                  "--merge {}: schema version {}, and this cprecord merges version {}: record "
                  "every shard with one cprr version",
                  path, db.schema_version(), kSchemaVersion);
  }
  RecordedRun run =
      RecordReader(path, "--merge", Database::Mode::read_finished).latest_run("--merge");
  Statement merged(db, "SELECT count(*) FROM run WHERE merged_into = ?");
  merged.bind(1, run.id);
  if (merged.step() && merged.int64(0) > 0) {
    CPRR_THROW_AS(UsageError,
                  "--merge {}: its latest run ({}) is itself a merge of shards: give the shard "
                  "databases it was made of",
                  path, run.id);
  }
  if (!run.finished_at || !run.exit_code) {
    CPRR_THROW_AS(UsageError,
                  "--merge {}: its latest run ({}) never finished (the recorder was killed): run "
                  "that shard again",
                  path, run.id);
  }
  if (*run.exit_code > 2) {
    CPRR_THROW_AS(UsageError,
                  "--merge {}: its latest run ({}) was interrupted (exit {}), so its cases were "
                  "not judged: run that shard again",
                  path, run.id, *run.exit_code);
  }
  return source_of(path, std::move(run), db);
}

// The code as a merge compares it: file names and content, not the folders a job checked out to.
std::string code_text(const RecordedRun& r) {
  std::vector<std::string> parts;
  for (const CodeFile& f : r.code) {
    parts.push_back(std::filesystem::path(f.path).filename().string() + " " + f.xxh3);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// Every refusal the header lists, between the first source and each other one.
void check_together(const std::vector<Source>& sources) {
  const Source& a = sources.front();
  std::map<uint32_t, const Source*> by_index;
  std::map<std::string, const Source*> by_label;
  for (const Source& b : sources) {
    const auto differ = [&](const char* what, const std::string& x, const std::string& y,
                            const char* fix) {
      if (x == y) return;
      CPRR_THROW_AS(UsageError, "--merge: {} has {} {}, {} has {}: {}", name_of(a), what, x,
                    name_of(b), y, fix);
    };
    differ("backend", std::string(backend_name(a.run.backend)),
           std::string(backend_name(b.run.backend)), "merge the shards of one cprecord command");
    differ("mode", a.run.mode, b.run.mode, "merge the shards of one cprecord command");
    differ("code", code_text(a.run), code_text(b.run),
           "the shards ran different case files or worker binaries; build once and give every "
           "job the same files");
    differ("plan", a.run.plan_hash, b.run.plan_hash,
           "their plans differ (cases, --filter, --exclude, --mode or --repeat)");
    const auto split = [](const Source& x) {
      return std::string(x.part.by_time ? "split by --by-time" : "split by label");
    };
    differ("shards", split(a), split(b), "merge the shards of one split");
    if (a.part.count != b.part.count) {
      CPRR_THROW_AS(UsageError,
                    "--merge: {} and {} split the plan into different numbers of shards: merge "
                    "the shards of one split",
                    name_of(a), name_of(b));
    }
    const auto [it, fresh] = by_index.emplace(b.part.index, &b);
    if (!fresh && it->second->run.uid != b.run.uid) {
      CPRR_THROW_AS(UsageError,
                    "--merge: {} and {} are two runs of shard {}/{}: give one of them (a shard "
                    "run again goes into a new file, with the other shards)",
                    name_of(*it->second), name_of(b), b.part.index, b.part.count);
    }
    if (!fresh) continue;
    for (const std::string& label : b.labels) {
      const auto [at, first] = by_label.emplace(label, &b);
      if (!first) {
        CPRR_THROW_AS(UsageError,
                      "--merge: case {} ran in {} and in {}: the shards were split differently "
                      "(--by-time with different records?); split them from one record",
                      label, name_of(*at->second), name_of(b));
      }
    }
  }
}

// The columns of `table` as this build's schema has them, each copied as it is unless `set`
// gives the expression that replaces it.
std::string select_list(const Database& db, const std::string& table,
                        const std::map<std::string, std::string>& set, std::string* names) {
  Statement st(db, fmt::format("SELECT name FROM pragma_table_info('{}') ORDER BY cid", table));
  std::vector<std::string> cols, exprs;
  while (st.step()) {
    const std::string name = st.text(0);
    const auto it = set.find(name);
    cols.push_back(name);
    exprs.push_back(it == set.end() ? name : it->second);
  }
  *names = fmt::format("{}", fmt::join(cols, ", "));
  return fmt::format("{}", fmt::join(exprs, ", "));
}

void copy_rows(Database& db, const std::string& table,
               const std::map<std::string, std::string>& set, const std::string& where) {
  std::string names;
  const std::string exprs = select_list(db, table, set, &names);
  db.exec(fmt::format("INSERT INTO main.{0} ({1}) SELECT {2} FROM src.{0} WHERE {3}", table, names,
                      exprs, where));
}

int64_t scalar(const Database& db, const std::string& sql) {
  Statement st(db, sql);
  return st.step() && !st.is_null(0) ? st.int64(0) : 0;
}

// A new merged run in `db`, made from the attached shard's row.
int64_t merged_run(Database& db, const Source& s, const std::vector<std::string>& argv) {
  const std::map<std::string, std::string> set{
      {"id", "NULL"}, {"finished_at", "NULL"}, {"exit_code", "NULL"}, {"stopped", "NULL"},
      {"argv", "?1"}, {"uid", "?2"},           {"shard", "''"},       {"merged_into", "NULL"}};
  std::string names;
  const std::string exprs = select_list(db, "run", set, &names);
  Statement insert(db, fmt::format("INSERT INTO main.run ({}) SELECT {} FROM src.run WHERE id = ?3",
                                   names, exprs));
  insert.bind(1, nlohmann::json(argv).dump()).bind(2, new_run_uid()).bind(3, s.run.id);
  insert.run();
  return db.last_insert_id();
}

// Copies one shard's run, cases and executions with every per-rank row, in one transaction.
MergedShard copy_shard(Database& db, const Source& s, const std::vector<std::string>& argv,
                       int64_t& parent) {
  {
    Statement attach(db, "ATTACH DATABASE ? AS src");
    attach.bind(1, finished_uri(s.path));  // as read_input read it: nothing written beside it
    attach.run();
  }
  struct Detach {  // after the transaction ends: SQLite detaches nothing inside one
    Database& db;
    ~Detach() {
      try {
        db.exec("DETACH DATABASE src");
      } catch (const std::exception&) {
      }
    }
  } detach{db};
  MergedShard out = entry_of(s, false);
  Transaction tx(db);
  if (parent == 0) parent = merged_run(db, s, argv);
  const std::string run = std::to_string(s.run.id);
  copy_rows(db, "run", {{"id", "NULL"}, {"merged_into", std::to_string(parent)}}, "id = " + run);
  out.run = db.last_insert_id();
  const auto offset = [&](const std::string& table) {
    const int64_t next = scalar(db, fmt::format("SELECT max(id) FROM main.{}", table)) + 1;
    return next -
           scalar(db, fmt::format("SELECT min(id) FROM src.{} WHERE run_id = {}", table, run));
  };
  const std::string cases = std::to_string(offset("test_case"));
  const std::string execs = std::to_string(offset("execution"));
  copy_rows(db, "test_case", {{"id", "id + " + cases}, {"run_id", std::to_string(parent)}},
            "run_id = " + run);
  copy_rows(db, "execution",
            {{"id", "id + " + execs},
             {"run_id", std::to_string(out.run)},
             {"case_id", "case_id + " + cases}},
            "run_id = " + run);
  const std::string of_run =
      "execution_id IN (SELECT id FROM src.execution WHERE run_id = " + run + ")";
  for (const char* table :
       {"rank_result", "capture", "alloc_event", "op", "collective", "process_group"}) {
    copy_rows(db, table, {{"execution_id", "execution_id + " + execs}}, of_run);
  }
  tx.commit();
  return out;
}

// The merged run's last word: its start (the earliest shard's), its end, exit code and what is
// missing, all from the shards it now holds.
void finish_merged(Database& db, int64_t parent, MergeResult& result) {
  Transaction tx(db);
  Statement shards(db, "SELECT shard, exit_code, stopped FROM run WHERE merged_into = ?");
  shards.bind(1, parent);
  std::set<uint32_t> present;
  std::vector<std::string> stopped;
  int code = 0;
  while (shards.step()) {
    const std::optional<Shard> part = shard_of_run(shards.text(0));
    if (part) {
      present.insert(part->index);
      result.shard_count = part->count;
    }
    code = std::max(code, static_cast<int>(shards.int64(1)));
    if (!shards.is_null(2))
      stopped.push_back(fmt::format("shard {}: {}", shards.text(0), shards.text(2)));
  }
  result.missing.clear();
  for (uint32_t i = 1; i <= result.shard_count; ++i) {
    if (!present.contains(i)) result.missing.push_back(fmt::format("{}/{}", i, result.shard_count));
  }
  if (!result.missing.empty()) {
    code = std::max(code, 1);
    stopped.push_back(fmt::format("shard(s) {} not merged", fmt::join(result.missing, ", ")));
  }
  result.exit_code = code;
  Statement update(
      db,
      "UPDATE run SET started_at = (SELECT min(started_at) FROM run WHERE "
      "merged_into = ?1), finished_at = ?2, exit_code = ?3, stopped = ?4 WHERE id = ?1");
  update.bind(1, parent).bind(2, iso8601_utc(std::chrono::system_clock::now()));
  update.bind(3, int64_t{code});
  if (stopped.empty()) {
    update.bind_null(4);
  } else {
    update.bind(4, fmt::format("{}", fmt::join(stopped, "; ")));
  }
  update.run();
  tx.commit();
}

// The merged run of `out` that holds one of `inputs` already (a merge given again, or given the
// shards a first merge lacked), with the shards it holds, read as sources too: the merge is
// checked against them and adds to that run. None: the merge makes a new merged run, so a file
// can keep one merged run per night of the same plan.
struct Held {
  int64_t parent = 0;
  std::vector<Source> shards;
};

Held held_shards(const std::string& out, const std::vector<Source>& inputs) {
  // No file, or one a merge killed before its schema left (0 or one page): nothing held yet,
  // and the merge's own open makes it whole, so the same merge simply runs again.
  if (Database::is_empty_file(out)) return {};
  const Database db = Database::open(out, Database::Mode::read_only);
  if (db.schema_version() < kSchemaVersion) return {};  // no merge in it yet
  const std::vector<RecordedRun> runs = RecordReader(out).runs();
  Held held;
  for (const RecordedRun& r : runs) {
    for (const Source& in : inputs) {
      if (r.uid != in.run.uid) continue;
      if (!r.merged_into) {
        CPRR_THROW_AS(UsageError,
                      "--db {} holds {}'s run itself (run {}), not merged: merge into a new file",
                      out, in.path, r.id);
      }
      if (held.parent != 0 && held.parent != *r.merged_into) {
        CPRR_THROW_AS(UsageError,
                      "--db {}: the runs given were merged into two of its runs ({} and {}): "
                      "give the shards of one of them",
                      out, held.parent, *r.merged_into);
      }
      held.parent = *r.merged_into;
    }
  }
  for (const RecordedRun& r : runs) {
    if (held.parent != 0 && r.merged_into == held.parent) {
      held.shards.push_back(source_of(out, r, db));
      held.shards.back().already = true;
    }
  }
  return held;
}

}  // namespace

MergeResult merge_runs(const std::string& out, const std::vector<std::string>& inputs,
                       const std::vector<std::string>& argv) {
  CPRR_CHECK(!inputs.empty(), "merge_runs: no input");
  std::vector<Source> given;
  for (const std::string& path : inputs) {
    std::error_code ec;
    if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(path, out, ec)) {
      CPRR_THROW_AS(UsageError, "--merge {}: that is --db itself; merge into a new file", path);
    }
    given.push_back(read_input(path));
  }
  Held before = held_shards(out, given);
  std::map<std::string, int64_t> in_out;  // uid -> its run in `out`, for the shards held there
  for (const Source& s : before.shards) in_out[s.run.uid] = s.run.id;
  std::vector<Source> all = std::move(before.shards);
  all.insert(all.end(), given.begin(), given.end());
  check_together(all);
  Database db = Database::open(out, Database::Mode::read_write);
  MergeResult result;
  int64_t parent = before.parent;
  for (const Source& s : given) {
    if (const auto it = in_out.find(s.run.uid); it != in_out.end()) {  // held, or given twice
      result.shards.push_back(entry_of(s, true));
      result.shards.back().run = it->second;
      continue;
    }
    result.shards.push_back(copy_shard(db, s, argv, parent));
    in_out[s.run.uid] = result.shards.back().run;
  }
  CPRR_CHECK(parent != 0, "--merge into {}: no merged run holds the shards given", out);
  result.run = parent;
  finish_merged(db, parent, result);
  return result;
}

}  // namespace cprr

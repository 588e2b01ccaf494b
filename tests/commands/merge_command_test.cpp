// cprecord --merge and --by-time in-process: the shards of a plan merged equal the plan run
// whole, case for case; a merge is idempotent, adds a missing shard later, refuses what does not
// belong together, and the merged run is one run to --rerun-failed, --json and cpreplay.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "commands/replay_command.h"
#include "runtime/error.h"
#include "schema/record_reader.h"
#include "schema/store.h"
#include "tests/commands/record_support.h"

namespace cprr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace record_test;  // NOLINT(google-build-using-namespace): this file's own helpers

// Passing, failing, crashing, leaking and reading-uninitialized cases, at W=2 and 4: each with
// outputs a rerun repeats (a seeded race's are not).
const char* const kMergePlan =
    "^(healthy/(noop|broadcast|all_reduce\\{count=1,dtype=f32|two_stream_pipeline\\{n=4096)|"
    "bug/(segfault_rank|uninitialized_read|global_rng\\{n=256)|fixed/cp_maxlogit_race|"
    "fault/throw_before_collective|fixed/global_rng\\{n=256)";

std::string db_named(const std::string& name) { return test_db() + "." + name; }

RecordOptions plan_opts(const std::string& db, const std::string& mode) {
  RecordOptions o = opts(kWorker, kMergePlan);
  o.db = db;
  o.mode = mode;
  return o;
}

// Shard `shard` of the plan (as `change` alters it) recorded into its own file, as a CI job
// would: the file.
std::string record_shard(const std::string& name, const std::string& mode, const std::string& shard,
                         const std::function<void(RecordOptions&)>& change = {}) {
  RecordOptions o = plan_opts(db_named(name), mode);
  o.shard = shard;
  if (change) change(o);
  const Recorded r = record(o);
  EXPECT_EQ(r.code, 0) << name << " " << shard << r.err;
  return o.db;
}

// The three shards of the plan, each into its own file, as three CI jobs would.
std::vector<std::string> record_shards(const std::string& tag, const std::string& mode) {
  std::vector<std::string> files;
  for (int i = 1; i <= 3; ++i) {
    files.push_back(record_shard(tag + std::to_string(i), mode, std::to_string(i) + "/3"));
  }
  return files;
}

Recorded merge(const std::string& out, const std::vector<std::string>& inputs) {
  RecordOptions o;
  o.db = out;
  o.merge = inputs;
  o.json = true;
  return record(o);
}

// What a run says about each case, by label: its judgement and every execution's mode, attempt,
// status and each rank's output hashes.
using Seen = std::map<std::string, std::vector<std::string>>;

Seen seen_in(const std::string& db, int64_t run) {
  const RecordReader reader(db);
  Seen out;
  for (const RecordedCase& c : reader.cases()) {
    if (c.run_id != run) continue;
    std::vector<std::string>& lines = out[c.instance.label()];
    EXPECT_TRUE(c.judgement.has_value()) << c.instance.label();
    if (!c.judgement) continue;
    lines.push_back(fmt::format("plan {} verdict {} as_expected {}", c.instance.id,
                                c.judgement->verdict.value_or("-"), c.judgement->as_expected));
    for (const RecordedExecution& e : reader.executions(c.id, RecordReader::Detail::captures)) {
      std::string hashes;
      for (const RankReport& rank : e.result.ranks) {
        if (!rank.done) continue;
        for (const Capture& cap : rank.done->capture.outputs)
          hashes += fmt::format(" {} {:x}", cap.name, cap.digest.whole);
      }
      lines.push_back(fmt::format("{} #{} {}:{}", mode_name(e.result.mode), e.result.attempt,
                                  status_name(e.result.status), hashes));
    }
  }
  return out;
}

int64_t latest(const std::string& db) { return RecordReader(db).latest_run("test").id; }

TEST(MergeCommand, ThreeShardsMergedEqualThePlanRunWholeCaseForCase) {
  const std::vector<std::string> shards = record_shards("fresh", "fresh");
  const std::string whole = db_named("whole");
  ASSERT_EQ(record(plan_opts(whole, "fresh")).code, 0);
  const std::string merged = db_named("merged");
  const Recorded r = merge(merged, shards);
  EXPECT_EQ(r.code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("exit_code"), 0);
  const Seen want = seen_in(whole, latest(whole));
  EXPECT_GT(want.size(), 12u);
  EXPECT_EQ(seen_in(merged, latest(merged)), want);
  EXPECT_EQ(doc.at("cases").size(), want.size());
  // The shards are kept beside the merged run, which holds the cases.
  const std::vector<RecordedRun> runs = RecordReader(merged).runs();
  ASSERT_EQ(runs.size(), 4u);
  std::set<std::string> parts;
  for (const RecordedRun& run : runs) {
    if (run.id == latest(merged)) {
      EXPECT_FALSE(run.merged_into.has_value());
      EXPECT_EQ(run.shard, "");
      continue;
    }
    EXPECT_EQ(run.merged_into, latest(merged));
    parts.insert(run.shard);
  }
  EXPECT_EQ(parts, (std::set<std::string>{"1/3", "2/3", "3/3"}));
}

TEST(MergeCommand, AMergeIsIdempotentAndAddsAMissingShardLater) {
  const std::vector<std::string> shards = record_shards("idem", "pool");
  const std::string merged = db_named("idem-merged");
  const Recorded part = merge(merged, {shards[0], shards[2]});
  EXPECT_EQ(part.code, 1) << "a shard is missing";
  EXPECT_THAT(part.err, HasSubstr("shard(s) 2/3 of 3 are not in the merged run"));
  EXPECT_THAT(json::parse(part.out).at("stopped").get<std::string>(), HasSubstr("2/3 not merged"));
  const auto count = [&](const char* table) {
    const Database db = Database::open(merged, Database::Mode::read_only);
    Statement st(db, fmt::format("SELECT count(*) FROM {}", table));
    st.step();
    return st.int64(0);
  };
  // Given again with the shard it lacked, the merge adds that one to the same merged run.
  const Recorded rest = merge(merged, shards);
  EXPECT_EQ(rest.code, 0) << rest.err;
  EXPECT_THAT(rest.err, HasSubstr("was merged before"));
  const std::vector<int64_t> before{count("run"), count("test_case"), count("execution"),
                                    count("op"), count("capture")};
  const Recorded again = merge(merged, shards);
  EXPECT_EQ(again.code, 0);
  EXPECT_THAT(again.err, HasSubstr("was merged before"));
  EXPECT_EQ((std::vector<int64_t>{count("run"), count("test_case"), count("execution"), count("op"),
                                  count("capture")}),
            before);
  EXPECT_EQ(count("run"), 4) << "one merged run and its three shards";
  EXPECT_EQ(json::parse(again.out).at("cases").size(), json::parse(rest.out).at("cases").size());
  // Another night's shard of the same plan, merged into the same file, is a merged run of its
  // own: the first one's cases and exit code stay as they were.
  const Recorded second = merge(merged, {record_shard("idem-night2", "pool", "2/3")});
  EXPECT_EQ(second.code, 1) << "shards 1/3 and 3/3 of the second night are missing";
  EXPECT_EQ(count("run"), 6) << "a second merged run and its one shard";
  EXPECT_EQ(RecordReader(merged).run(1).exit_code, 0)
      << "the first night's merged run is as it was";
}

TEST(MergeCommand, AMergedPooledCaseReplaysAfterThePredecessorsOfItsShard) {
  const std::vector<std::string> shards = record_shards("pool", "pool");
  const std::string merged = db_named("pool-merged");
  ASSERT_EQ(merge(merged, shards).code, 0);
  const RecordReader reader(merged);
  std::vector<RecordedCase> mine;
  for (const RecordedCase& c : reader.cases()) {
    for (const RecordedExecution& e : reader.executions(c.id, RecordReader::Detail::captures)) {
      const std::vector<RecordedCase> before = reader.predecessors(e);
      if (before.empty()) continue;
      std::set<std::string> labels_before;
      for (const RecordedCase& p : before) labels_before.insert(p.instance.label());
      // Its predecessors in the merged file are those of the same case in its shard's file.
      for (const std::string& path : shards) {
        const RecordReader src(path);
        for (const RecordedCase& sc : src.cases()) {
          if (sc.instance.label() != c.instance.label()) continue;
          for (const RecordedExecution& se :
               src.executions(sc.id, RecordReader::Detail::captures)) {
            std::set<std::string> want;
            for (const RecordedCase& p : src.predecessors(se)) want.insert(p.instance.label());
            EXPECT_EQ(labels_before, want) << c.instance.label();
          }
        }
      }
      mine.push_back(c);
    }
  }
  ASSERT_FALSE(mine.empty()) << "pooled cases with predecessors";
  // cpreplay replays such a case from the merged file.
  ReplayCommandOptions ro;
  ro.replay.db = merged;
  ro.case_id = mine.front().id;
  std::ostringstream out, err;
  EXPECT_EQ(run_replay(ro, out, err, false), 0) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr(mine.front().instance.label()));
}

TEST(MergeCommand, RerunFailedReadsTheMergedRun) {
  const std::vector<std::string> shards = record_shards("rerun", "pool");
  const std::string merged = db_named("rerun-merged");
  const Recorded m = merge(merged, shards);
  ASSERT_EQ(m.code, 0) << m.err;
  RecordOptions again = opts(kWorker, kMergePlan);
  again.db = merged;
  again.rerun_failed = true;
  const Recorded r = record(again);
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr("had no case that was not as expected"))
      << "the merged run is the latest, not its last shard";
}

TEST(MergeCommand, AnEmptyShardIsRecordedSoTheMergeIsComplete) {
  std::vector<std::string> files;
  for (int i = 1; i <= 3; ++i) {
    RecordOptions o = opts(kWorker, "^healthy/noop@2$");
    o.db = db_named("one" + std::to_string(i));
    o.shard = std::to_string(i) + "/3";
    EXPECT_EQ(record(o).code, 0);
    files.push_back(o.db);
    const RecordedRun run = RecordReader(o.db).latest_run("test");
    EXPECT_EQ(run.shard, o.shard);
    EXPECT_EQ(run.exit_code, 0) << "an empty shard is a finished run of no case";
  }
  const Recorded r = merge(db_named("one-merged"), files);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("not in the merged run")));
  EXPECT_EQ(json::parse(r.out).at("cases").size(), 1u);
}

void expect_refused(const std::string& out, const std::vector<std::string>& inputs,
                    const std::string& says) {
  try {
    merge(out, inputs);
    ADD_FAILURE() << "merged: " << says;
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr(says));
  }
  EXPECT_FALSE(std::filesystem::exists(out)) << "nothing written before every input passed";
}

TEST(MergeCommand, RefusesWhatDoesNotBelongTogetherNamingIt) {
  const std::vector<std::string> shards = record_shards("refuse", "fresh");
  const std::string other = record_shard("other-plan", "fresh", "2/3",
                                         [](RecordOptions& o) { o.filter = "^healthy/noop"; });
  expect_refused(db_named("r1"), {shards[0], other}, "their plans differ");
  expect_refused(db_named("r2"), {shards[0], record_shard("two-of-one", "fresh", "1/3")},
                 "two runs of shard 1/3");
  expect_refused(db_named("r3"), {shards[0], record_shard("halves", "fresh", "1/2")},
                 "different numbers of shards");
  expect_refused(db_named("r4"), {shards[0], record_shard("pooled", "pool", "2/3")},
                 "has mode fresh");
  expect_refused(db_named("r5"), {shards[0], db_named("no-such")}, "no such file");
  // An old file, and a run that never finished.
  const std::string old = db_named("old");
  std::filesystem::copy_file(shards[1], old);
  Database::open(old, Database::Mode::read_write).exec("PRAGMA user_version = 16");
  expect_refused(db_named("r6"), {shards[0], old}, "schema version 16");
  const std::string killed = db_named("killed");
  std::filesystem::copy_file(shards[1], killed);
  Database::open(killed, Database::Mode::read_write)
      .exec("UPDATE run SET finished_at = NULL, exit_code = NULL");
  expect_refused(db_named("r7"), {shards[0], killed}, "never finished");
  const std::string timed =
      record_shard("timed-2of3", "fresh", "2/3", [&](RecordOptions& o) { o.by_time = shards[0]; });
  expect_refused(db_named("r10"), {shards[0], timed}, "split by --by-time");
  const std::string merged = db_named("r9-merged");
  ASSERT_EQ(merge(merged, shards).code, 0);
  expect_refused(db_named("r9"), {merged}, "is itself a merge of shards");
  RecordOptions misuse;
  misuse.db = db_named("r8");
  misuse.merge = shards;
  misuse.filter = "noop";
  EXPECT_THROW(record(misuse), UsageError);
}

// What SQLite leaves beside a database it opened: a merge must leave nothing beside its inputs.
std::vector<std::string> beside(const std::string& db) {
  std::vector<std::string> out;
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    if (std::filesystem::exists(db + suffix)) out.push_back(db + suffix);
  }
  return out;
}

TEST(MergeCommand, AMergeKilledBeforeItsSchemaRunsAgainAndWritesNothingBesideItsInputs) {
  const std::vector<std::string> shards = record_shards("again", "fresh");
  for (const std::string& s : shards) ASSERT_THAT(beside(s), ::testing::IsEmpty()) << s;
  // What a merge killed in its first open leaves: an empty file, or one page of a WAL database
  // with no tables yet.
  const std::string zero = db_named("again-zero");
  std::ofstream(zero).flush();
  const std::string page = db_named("again-page");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(page.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  ASSERT_GT(std::filesystem::file_size(page), 0u);
  for (const std::string& out : {zero, page}) {
    const Recorded r = merge(out, shards);
    EXPECT_EQ(r.code, 0) << out << r.err;
    EXPECT_EQ(seen_in(out, latest(out)).size(), json::parse(r.out).at("cases").size()) << out;
  }
  // Shards read as finished (immutable): no -wal or -shm beside them, so a read-only folder of
  // CI artifacts serves as well.
  for (const std::string& s : shards) EXPECT_THAT(beside(s), ::testing::IsEmpty()) << s;
}

TEST(MergeCommand, ABrokenInputIsNamedByTheOptionThatGaveIt) {
  const std::string garbage = db_named("not-a-database");
  std::ofstream(garbage) << std::string(8192, 'x');
  try {
    merge(db_named("broken-merged"), {garbage});
    ADD_FAILURE() << "merged a file that is no database";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--merge " + garbage + ": not an SQLite database"));
    EXPECT_THAT(e.what(), Not(HasSubstr("--db")));
  }
  RecordOptions timed = plan_opts(db_named("broken-timed"), "fresh");
  timed.shard = "1/2";
  timed.by_time = garbage;
  try {
    record(timed);
    ADD_FAILURE() << "split by the times of a file that is no database";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--by-time " + garbage + ": not an SQLite database"));
    EXPECT_THAT(e.what(), Not(HasSubstr("--db")));
  }
}

TEST(MergeCommand, ByTimeSplitsByRecordedTimesAndTheShardsStillCoverThePlan) {
  const std::string whole = db_named("timed");
  ASSERT_EQ(record(plan_opts(whole, "pool")).code, 0);
  std::multiset<std::string> joined;
  std::vector<std::string> files;
  for (int i = 1; i <= 2; ++i) {
    RecordOptions o = plan_opts(db_named("timed" + std::to_string(i)), "pool");
    o.shard = std::to_string(i) + "/2";
    o.by_time = whole;
    ASSERT_EQ(record(o).code, 0);
    files.push_back(o.db);
    const RecordedRun run = RecordReader(o.db).latest_run("test");
    EXPECT_EQ(run.shard, o.shard + " by time");
    for (const RecordedCase& c : RecordReader(o.db).cases()) joined.insert(c.instance.label());
  }
  std::multiset<std::string> all;
  for (const RecordedCase& c : RecordReader(whole).cases()) all.insert(c.instance.label());
  EXPECT_EQ(joined, all);
  EXPECT_EQ(merge(db_named("timed-merged"), files).code, 0);
  RecordOptions alone = plan_opts(db_named("timed-alone"), "pool");
  alone.by_time = whole;
  EXPECT_THROW(record(alone), UsageError) << "--by-time splits for --shard";
}

}  // namespace
}  // namespace cprr

-- cprr store: the SQLite schema. Version 18 (schema/store.h: kSchemaVersion and its bump rule;
-- store_open.cpp: kMigrations). Version 2 added test_case.verdict, as_expected and fresh_vs_pool;
-- version 3 op.read_spans and write_spans; version 4 op.peer and op.epoch; version 5
-- collective.op and execution.symmetric_pool; version 6 the views at the end of this file;
-- version 7 run.stopped; version 8 run.shuffle_seed; version 9 run.launcher; version 10
-- execution.collectives and rank_gpus; version 11 run.worker_args; version 12 run.code; version
-- 13 the collective's position, group, members, peer, site and bytes per peer, and the
-- process_group table; version 14 op.moves; version 15 op.touches and touch_spans; version 16
-- op.probed; version 17 run.uid, shard, plan_hash, merged_into and execution.devices; version 18
-- execution.master_port.
--
-- One database file holds any number of runs. The recorder writes the run row and the planned
-- cases first, then every execution with all its per-rank rows in ONE transaction, committed
-- explicitly, then the judgement of every case in one transaction; run.finished_at is set last.
-- A recorder killed mid-run therefore leaves every completed execution intact, its cases unjudged
-- (test_case.as_expected IS NULL) and the run visibly incomplete (finished_at IS NULL).
-- 64-bit hashes are stored as INTEGER holding the unsigned value's bit pattern.

-- A cprecord invocation.
CREATE TABLE run (
  id            INTEGER PRIMARY KEY,
  started_at    TEXT NOT NULL,     -- ISO-8601 UTC
  finished_at   TEXT,              -- NULL: still running, or the recorder died (incomplete)
  exit_code     INTEGER,           -- cprecord's exit code; NULL while incomplete
  tool_version  TEXT NOT NULL,
  host          TEXT NOT NULL,
  backend       TEXT NOT NULL,     -- cpu | cuda
  mode          TEXT NOT NULL,     -- pool | fresh | both
  placement     TEXT NOT NULL,     -- allocator placement policy of every execution
  worker        TEXT NOT NULL,     -- absolute path of the worker binary holding the cases
  argv          TEXT NOT NULL,     -- JSON array: the command line
  libraries     TEXT NOT NULL,     -- JSON object: library -> version (sqlite, protocol, cuda, nccl, ...)
  environment   TEXT NOT NULL,     -- JSON object: the variables that shape a run (CPRR_*, NCCL_*, CUDA_*, OMP_*)
  -- (version 7) why the run ended before its plan did, e.g. "--fail-fast: case 12
  -- (healthy/noop@2) was not as expected"; NULL: it ran its plan, or it was interrupted or
  -- killed (exit_code and finished_at say which)
  stopped       TEXT,
  -- (version 8) cprecord --shuffle: the seed its case order was drawn from (cprecord
  -- --shuffle=SEED runs the same order again); NULL: the plan's order. Each execution's
  -- pool_position records the order either way, so cpreplay finds the same predecessors.
  shuffle_seed  INTEGER,
  -- (version 9) cprecord --launcher: how its worlds started their ranks, a JSON object
  -- {"kind": "mpirun"|"srun", "program", "hosts": [...], "partition", "gpus_per_node",
  -- "extra": [...], "listen", "advertise", "shared_dir"}; cpreplay starts its worlds the same
  -- way. NULL: local (ranks spawned by the recorder itself).
  launcher      TEXT,
  -- (version 11) JSON array: the arguments the worker takes before the rank's own (cprecord
  -- --python: ["--cases", FILE...], the Python case files its rank processes import); cpreplay
  -- starts the same worker with the same arguments. [] for a worker binary of cases.
  worker_args   TEXT NOT NULL DEFAULT '[]',
  -- (version 12) JSON array of {"path", "xxh3"}: the code the cases came from as recorded, each
  -- case file of a Python run or the worker binary of a C++ run, with the XXH3-64 of its content
  -- (16 hex digits; "" when it could not be read). cpreplay says which changed since. [] before.
  code          TEXT NOT NULL DEFAULT '[]',
  -- (version 17) what a merge of shard databases needs (cprecord --merge). uid: 32 hex digits
  -- drawn when the run starts, naming it in every file it is merged into (a merge skips a run
  -- whose uid the file holds); '' before version 17, until the migration draws one.
  uid           TEXT NOT NULL DEFAULT '',
  -- cprecord --shard: "I/N", with " by time" when --by-time split it; '' the whole plan.
  shard         TEXT NOT NULL DEFAULT '',
  -- XXH3-64 (16 hex digits) of the plan before --shard: its labels, expectations, --mode and
  -- --repeat. The shards of one plan share it; a merge refuses runs that differ.
  plan_hash     TEXT NOT NULL DEFAULT '',
  -- A run merged into another (cprecord --merge): the merged run, which holds the cases; this
  -- run keeps its executions (their worlds and pool positions are this run's). NULL: not merged.
  merged_into   INTEGER REFERENCES run(id)
);

-- A case instance as planned: case x grid point x world size. `id` is what cpreplay --case takes.
CREATE TABLE test_case (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES run(id),
  plan_id       INTEGER NOT NULL,  -- 1-based position in the run's plan
  name          TEXT NOT NULL,     -- registered name, e.g. healthy/all_reduce
  label         TEXT NOT NULL,     -- name{k=v,...}@world_size
  params        TEXT NOT NULL,     -- JSON object
  world_size    INTEGER NOT NULL,
  seed          INTEGER NOT NULL,
  expect        TEXT NOT NULL,     -- pass | fail | crash | hang
  timeout_s     REAL NOT NULL,     -- the case's own deadline (0: the run's default)
  seeded_bug    TEXT NOT NULL DEFAULT '', -- a seeded bug's expected verdict (e.g. state_leak)
  -- The run's judgement of the case over all its executions (modes x repeats), written at the end
  -- of the run; all three are NULL until then (and stay so when the recorder died first).
  -- Version 2; a migration appends them, so they stay the last columns.
  -- collective_mismatch | crash | hang | allocator_order | uninitialized_read | stream_race |
  -- nondeterministic; NULL: none decidable at record time
  verdict       TEXT,
  as_expected   INTEGER,           -- 1: nothing counted against cprecord's exit code; 0: something did
  fresh_vs_pool TEXT               -- one line: the first divergence of a pooled execution from the
                                   -- fresh one; NULL: none, or the run did not use both modes
);

-- One run of one case in one world. For pooled executions (mode = 'pool'), the executions of the
-- same run with the same world_id and a smaller pool_position are its predecessors: the cases
-- that ran before it in that process.
CREATE TABLE execution (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES run(id),
  case_id       INTEGER NOT NULL REFERENCES test_case(id),
  mode          TEXT NOT NULL,     -- fresh | pool
  world_id      INTEGER NOT NULL,  -- world that ran it within the run (0: none started)
  pool_position INTEGER NOT NULL,  -- 1-based position among the executions of that world
  attempt       INTEGER NOT NULL,  -- 1-based repeat number (--repeat)
  status        TEXT NOT NULL,     -- pass | fail | crash | hang | error | skip
  as_expected   INTEGER NOT NULL,  -- 1 when status meets test_case.expect
  summary       TEXT NOT NULL,     -- one line: what went wrong and where
  started_at    TEXT NOT NULL,
  wall_ms       REAL NOT NULL,
  startup_ms    REAL NOT NULL,     -- world start-up included in wall_ms (0 when reused)
  -- (version 5) what the world's ranks said their symmetric pool is, e.g. on CUDA "NCCL window
  -- (ncclMemAlloc, ncclCommWindowRegister NCCL_WIN_COLL_SYMMETRIC); peers mapped", or why it is
  -- not one; "rank 0: ...; rank 1: ..." when they differ; '' when no world ran it or before
  -- version 5
  symmetric_pool TEXT NOT NULL DEFAULT '',
  -- (version 10) how the world's collectives travelled: nccl (cuda, a GPU per rank),
  -- gloo_staged (cuda through Gloo, device buffers staged through pinned host memory: ranks
  -- sharing a GPU, or --collectives gloo), gloo (the cpu backend); outputs of two transports may
  -- differ by reduction order with no bug. '' when no world ran it or before version 10
  collectives   TEXT NOT NULL DEFAULT '',
  -- (version 10) the GPU each rank ran on, in rank order, e.g. "0,0,0,0" (four ranks sharing
  -- GPU 0); '' on cpu, when no world ran it or before version 10
  rank_gpus     TEXT NOT NULL DEFAULT '',
  -- (version 17) where the world ran when cprecord --jobs placed it: "cpus 0-3" (the cores its
  -- ranks were pinned to) or "gpus GPU-<uuid>,..." (the GPUs its ranks saw, in order; indexes
  -- where no UUID is known); '' when not placed, and before version 17
  devices       TEXT NOT NULL DEFAULT '',
  -- (version 18) the MASTER_PORT the world's ranks got: a port the run claimed for the job on
  -- its host, which no other cprr run there shared; 0 when none was set, and before version 18
  master_port   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX execution_by_world ON execution(run_id, world_id, pool_position);
CREATE INDEX execution_by_case ON execution(case_id);

-- What each rank said (or how it ended) in one execution.
CREATE TABLE rank_result (
  execution_id  INTEGER NOT NULL REFERENCES execution(id),
  rank          INTEGER NOT NULL,
  outcome       TEXT NOT NULL,     -- ok | fail | error | died | no_result
  error         TEXT NOT NULL,     -- the rank's error text (failed expectation, exception)
  signal        INTEGER,           -- terminating signal of a rank that died
  exit_code     INTEGER,           -- exit code of a rank that exited
  protocol_error TEXT NOT NULL,
  watchdog      TEXT,              -- JSON: the watchdog's answer when the case hung (a rank that
                                   -- died may have one too): phase, entered_seq, entered_kind,
                                   -- completed_seq, completed_kind, running (array of text);
                                   -- it speaks of this execution unless phase is idle
  stdout_tail   BLOB NOT NULL,     -- what the rank wrote during this execution (newest bytes kept)
  stderr_tail   BLOB NOT NULL,
  reset_ms      REAL NOT NULL,
  body_ms       REAL NOT NULL,
  PRIMARY KEY (execution_id, rank)
) WITHOUT ROWID;

-- Probes (intermediates, in stream order) and outputs (results) of a rank, with their hashes
-- (kernels/hash.h defines chunk and whole hashes).
CREATE TABLE capture (
  execution_id  INTEGER NOT NULL REFERENCES execution(id),
  rank          INTEGER NOT NULL,
  kind          TEXT NOT NULL,     -- probe | output
  seq           INTEGER NOT NULL,  -- order among the rank's captures of this kind
  name          TEXT NOT NULL,
  dtype         TEXT NOT NULL,
  shape         TEXT NOT NULL,     -- JSON array
  bytes         INTEGER NOT NULL,
  stream        INTEGER NOT NULL,
  hash          INTEGER NOT NULL,  -- whole-buffer hash
  chunk_hashes  BLOB NOT NULL,     -- little-endian uint64 per 64 KiB chunk
  raw           BLOB,              -- the bytes themselves when bytes <= 4096
  PRIMARY KEY (execution_id, rank, kind, seq)
) WITHOUT ROWID;

-- Allocator events of a rank in one execution (seq restarts at 0 per execution).
CREATE TABLE alloc_event (
  execution_id  INTEGER NOT NULL REFERENCES execution(id),
  rank          INTEGER NOT NULL,
  seq           INTEGER NOT NULL,
  is_free       INTEGER NOT NULL,
  buffer        INTEGER NOT NULL,  -- buffer id within the execution
  name          TEXT NOT NULL,
  pool          TEXT NOT NULL,     -- device | symmetric | host
  bytes         INTEGER NOT NULL,
  offset        INTEGER NOT NULL,  -- offset inside the pool's arena
  stream        INTEGER NOT NULL,
  PRIMARY KEY (execution_id, rank, seq)
) WITHOUT ROWID;

-- The op log: every op in host issue order with its stream and access sets.
CREATE TABLE op (
  execution_id  INTEGER NOT NULL REFERENCES execution(id),
  rank          INTEGER NOT NULL,
  seq           INTEGER NOT NULL,
  stream        INTEGER NOT NULL,  -- -1: host
  -- kernel | copy | collective | record | wait | probe | output | host | sync | put | signal |
  -- wait_signal
  kind          TEXT NOT NULL,
  name          TEXT NOT NULL,
  reads         TEXT NOT NULL,     -- comma-separated buffer ids
  writes        TEXT NOT NULL,
  -- event id of record/wait, semaphore of signal/wait_signal (-1 otherwise)
  event         INTEGER NOT NULL,
  -- (version 3) which bytes of each buffer of reads / writes the op touches, in the same order:
  -- comma-separated "offset+bytes" from the buffer's start (a slice is its parent's id plus its
  -- span). '' (every row before version 3): whole buffers.
  read_spans    TEXT NOT NULL DEFAULT '',
  write_spans   TEXT NOT NULL DEFAULT '',
  -- (version 4) put / signal / wait_signal: the other rank (-1 otherwise, and before version 4);
  -- signal: the epoch it sets, wait_signal: the epoch it waits for (0 otherwise).
  peer          INTEGER NOT NULL DEFAULT -1,
  epoch         INTEGER NOT NULL DEFAULT 0,
  -- (version 14) 1: the op only moves bytes from its reads to its writes (a copy: OpRecord::moves
  -- in data/capture.h); 0 otherwise, and before version 14.
  moves         INTEGER NOT NULL DEFAULT 0,
  -- (version 15) buffers the op uses in a direction not known, and their spans, written as
  -- reads and read_spans are (OpRecord::touches); '' when none, and before version 15.
  touches       TEXT NOT NULL DEFAULT '',
  touch_spans   TEXT NOT NULL DEFAULT '',
  -- (version 16) 1: a probe replay learned the op's directions (OpRecord::probed): the bytes it
  -- changed are among its writes, its touches are bytes it left unchanged; 0 otherwise.
  probed        INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (execution_id, rank, seq)
) WITHOUT ROWID;

-- The collective log, numbered per communicator. A rank with a result (rank_result.outcome ok or
-- fail) has the collectives its case called; a rank without one (it died, hung or broke the
-- protocol) has those its flight record says it entered before that: the last up to 1024.
CREATE TABLE collective (
  execution_id  INTEGER NOT NULL REFERENCES execution(id),
  rank          INTEGER NOT NULL,
  -- its number in its group (a collective) or on its channel (a send or recv: group, sender,
  -- receiver); before version 13 every collective was on the world's group
  seq           INTEGER NOT NULL,
  kind          TEXT NOT NULL,     -- all_reduce | all_gather | ... | send | recv
  stream        INTEGER NOT NULL,
  dtype         TEXT NOT NULL,
  bytes         INTEGER NOT NULL,
  root          INTEGER NOT NULL,
  -- (version 5) all_reduce's reduction: sum | max | min; '' for other kinds and before version 5
  op            TEXT NOT NULL DEFAULT '',
  -- (version 13) its place in the rank's log (the order the rank called them)
  position      INTEGER NOT NULL DEFAULT 0,
  group_id      INTEGER NOT NULL DEFAULT 0,   -- process_group.id; 0: the world
  members       INTEGER NOT NULL DEFAULT 0,   -- the group's ranks, bit r for rank r; 0: all
  peer          INTEGER NOT NULL DEFAULT -1,  -- send: the receiver; recv: the sender; else -1
  site          TEXT NOT NULL DEFAULT '',     -- the caller's file:line, where known
  -- an uneven all-to-all's bytes to and from each rank of its group, in group-rank order
  -- ("7168,3072"); '' when not recorded
  send_bytes    TEXT NOT NULL DEFAULT '',
  recv_bytes    TEXT NOT NULL DEFAULT '',
  row_bytes     INTEGER NOT NULL DEFAULT 0,   -- the bytes of one row of its tensors; 0: not rows
  PRIMARY KEY (execution_id, rank, position)
) WITHOUT ROWID;

-- (version 13) A process group other than the world that a rank's collectives used or its case
-- made, as that rank knew it.
CREATE TABLE process_group (
  execution_id  INTEGER NOT NULL REFERENCES execution(id),
  rank          INTEGER NOT NULL,
  id            INTEGER NOT NULL,  -- its creation order in the process, equal across its ranks
  ranks         TEXT NOT NULL,     -- its ranks of the world in group-rank order, e.g. "2,3"
  backend       TEXT NOT NULL,     -- gloo | nccl | ...
  name          TEXT NOT NULL,     -- what the library calls it; '' when nothing
  PRIMARY KEY (execution_id, rank, id)
) WITHOUT ROWID;

-- ---- Views ----
-- The common questions, answered without a join (sqlite3 cprr.db 'SELECT * FROM case_summary').
-- Everything below this line is created with the tables, and again by the migration to version 6:
-- views hold no data, so they are always made from this text.

-- One row per case: its label, the distinct statuses of its executions per mode (NULL: that mode
-- did not run it), the fresh-vs-pooled judgement, the verdict, whether it met its expectation
-- (NULL: not judged, the recorder died first), and the command that replays it (add --db PATH
-- unless the file is ./cprr.db). Cases that differed between fresh and pooled:
-- SELECT * FROM case_summary WHERE fresh_vs_pool IS NOT NULL.
CREATE VIEW case_summary AS
SELECT c.run_id, c.id AS case_id, c.label, c.seeded_bug,
       (SELECT group_concat(DISTINCT e.status) FROM execution e
         WHERE e.case_id = c.id AND e.mode = 'fresh') AS fresh_status,
       (SELECT group_concat(DISTINCT e.status) FROM execution e
         WHERE e.case_id = c.id AND e.mode = 'pool') AS pool_status,
       c.fresh_vs_pool, c.verdict, c.as_expected,
       'cpreplay --case ' || c.id AS replay
  FROM test_case c;

-- The cases that counted against their run's exit code: the unexpected results of every run
-- (WHERE run_id = N for one).
CREATE VIEW unexpected_case AS
SELECT * FROM case_summary WHERE as_expected = 0;

-- Every execution, slowest first: wall time, the world start-up inside it (fresh mode), and the
-- rest, which is the case itself.
CREATE VIEW slowest_execution AS
SELECT e.run_id, e.case_id, c.label, e.id AS execution_id, e.mode, e.attempt, e.status,
       e.wall_ms, e.startup_ms, e.wall_ms - e.startup_ms AS case_ms
  FROM execution e JOIN test_case c ON c.id = e.case_id
 ORDER BY e.wall_ms DESC;

#!/usr/bin/env python3
"""Records Python cases twice, with the C++ op capture (cprr.capture.native_capture) and with the
Python dispatch mode (CPRR_OP_CAPTURE=python), and compares what the two stored: per execution
(case, mode, attempt) and rank, every op of the op log (stream, kind, name, reads, writes and their
spans, event, moves) and every allocation event (a tensor's address, its offset, left out: where
the allocator puts it differs from run to run); per case, the verdict. The
two captures must record the same.

    capture_compare.py CPRECORD [--captures A,B] [--b-cprecord CPRECORD_B] -- CPRECORD_ARGS...
        e.g. build/tools/cprecord -- --python corpus/python --mode both

--b-cprecord records B with another build's cprecord (and so its cprr-pyworker and package):
the same capture before and after a change that must not change what is recorded.

--captures python,python compares the Python mode with itself: what differs between two
recordings of a case whatever the capture (a case whose ranks fail in another order each run).
Host memory's addresses are reused as the heap allows, and the capture sees a host tensor freed
only when another one takes its address: so the ops' buffers are compared by the name of their
allocation, and the frees of host tensors are left out. Prints each difference (the first 20),
then a summary line. A case both name uninitialized_read passes or fails on what the heap left in
its never-written bytes, and one both name collective_mismatch ends as a crash or a hang on the
transport's timing (gloo may fail the mismatched call or wait in it): their executions' status is
not compared (their ops are). Exit status: 1
when anything differs, 0 when nothing does, 2 on a bad run.
"""

import os
import sqlite3
import subprocess
import sys
import tempfile

_OPS = ("SELECT rank, stream, kind, name, reads, writes, event, read_spans, write_spans, "
        "peer, epoch, moves FROM op WHERE execution_id = ? AND rank = ? ORDER BY seq")
# A device tensor's free is reported by its allocator; a host tensor's is inferred from the heap.
_ALLOCS = ("SELECT rank, is_free, name, pool, bytes, "
           "CASE WHEN pool IN ('tensor', 'torch_symmetric') THEN -1 ELSE offset END, stream "
           "FROM alloc_event WHERE execution_id = ? AND rank = ? AND "
           "NOT (is_free AND pool = 'tensor' AND (? = 'cpu' OR stream = -1)) ORDER BY seq")


def _named(con, eid, rows):
    """The ops' buffer ids replaced by their allocations' names (rank, buffer -> name)."""
    names = {(r, b): n for r, b, n in con.execute(
        "SELECT rank, buffer, name FROM alloc_event WHERE execution_id = ? AND NOT is_free",
        (eid,))}

    def name(rank, ids):
        return ",".join(names.get((rank, int(i)), i) for i in ids.split(",") if i)

    return [(r[0],) + r[1:4] + (name(r[0], r[4]), name(r[0], r[5])) + r[6:] for r in rows]


def record(cprecord, args, db, capture):
    env = dict(os.environ)
    env.pop("CPRR_OP_CAPTURE", None)  # the C++ capture, where it was built
    if capture == "python":
        env["CPRR_OP_CAPTURE"] = "python"
    done = subprocess.run([cprecord, *args, "--db", db], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode not in (0, 1):  # 1: a case not as expected, which both runs may share
        sys.stderr.write(done.stderr[-2000:])
        raise SystemExit(f"capture_compare: cprecord with the {capture} capture exited "
                         f"{done.returncode}")


def executions(db):
    """(label, mode, attempt) -> (execution id, status); label -> verdict."""
    con = sqlite3.connect(db)
    found = {}
    for eid, label, mode, attempt, status in con.execute(
            "SELECT e.id, c.label, e.mode, e.attempt, e.status FROM execution e "
            "JOIN test_case c ON c.id = e.case_id ORDER BY e.id"):
        found.setdefault((label, mode, attempt), (eid, status))
    verdicts = dict(con.execute("SELECT label, verdict FROM test_case"))
    return con, found, verdicts


def compare(native_db, python_db, backend):
    """The differences, as lines, and the number of executions compared."""
    out = []
    ncon, nexec, nverdicts = executions(native_db)
    pcon, pexec, pverdicts = executions(python_db)
    for label in sorted(set(nverdicts) | set(pverdicts)):
        if nverdicts.get(label) != pverdicts.get(label):
            out.append(f"{label}: verdict {nverdicts.get(label)} (A) vs "
                       f"{pverdicts.get(label)} (B)")
    compared, left = 0, []
    for key in sorted(set(nexec) & set(pexec)):
        (neid, nstatus), (peid, pstatus) = nexec[key], pexec[key]
        where = "{}, {} attempt {}".format(*key)
        # A case that reads never-written bytes passes or fails on what the heap left there, and
        # a mismatched collective crashes or hangs on the transport's timing: no capture decides
        # either (the same ops, logged alike, either way).
        if nstatus != pstatus and not _status_by_chance(key[0], nverdicts, pverdicts):
            out.append(f"{where}: status {nstatus} (A) vs {pstatus} (B); errors: "
                       f"{_errors(ncon, neid)} (A) vs {_errors(pcon, peid)} (B)")
        for rank in _ranks_alike(ncon, neid, pcon, peid, left, where):
            for part in ("op", "allocation"):
                if part == "op":
                    n = _named(ncon, neid, list(ncon.execute(_OPS, (neid, rank))))
                    p = _named(pcon, peid, list(pcon.execute(_OPS, (peid, rank))))
                else:
                    n = list(ncon.execute(_ALLOCS, (neid, rank, backend)))
                    p = list(pcon.execute(_ALLOCS, (peid, rank, backend)))
                if n != p:
                    first = next((i for i, (a, b) in enumerate(zip(n, p)) if a != b),
                                 min(len(n), len(p)))
                    out.append(f"{where}, rank {rank}: {part} {first} of {len(n)} (A) / "
                               f"{len(p)} (B): {n[first] if first < len(n) else None} vs "
                               f"{p[first] if first < len(p) else None}")
            compared += 1
    for key in sorted(set(nexec) ^ set(pexec)):
        out.append("{}, {} attempt {}: only in one recording".format(*key))
    return out, compared, left


def _errors(con, eid):
    """Each rank's error text that is not empty, shortened: why an execution's status differs."""
    rows = con.execute("SELECT rank, error FROM rank_result WHERE execution_id = ? AND error != '' "
                       "ORDER BY rank", (eid,))
    return "; ".join(f"rank {r}: {e[:160]}" for r, e in rows) or "none"


_BY_CHANCE = ("uninitialized_read", "collective_mismatch")


def _status_by_chance(label, nverdicts, pverdicts):
    return nverdicts.get(label) == pverdicts.get(label) and nverdicts.get(label) in _BY_CHANCE


def _ranks_alike(ncon, neid, pcon, peid, left, where):
    """The ranks that ended alike in both recordings (ok, or failed on their own): a rank
    stopped by another's failure stops wherever it was, which no capture decides."""
    query = "SELECT rank, outcome FROM rank_result WHERE execution_id = ?"
    n, p = dict(ncon.execute(query, (neid,))), dict(pcon.execute(query, (peid,)))
    for rank in sorted(set(n) | set(p)):
        if n.get(rank) == p.get(rank) and n.get(rank) in ("ok", "fail"):
            yield rank
        else:
            left.append(f"{where}, rank {rank}: {n.get(rank)} (A) / {p.get(rank)} (B)")


def main():
    if "--" not in sys.argv[2:] or len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cut = sys.argv.index("--")
    cprecord, options, args = sys.argv[1], sys.argv[2:cut], sys.argv[cut + 1:]
    captures, cprecords = ["native", "python"], [cprecord, cprecord]
    while options:
        if options[0] == "--captures" and len(options) >= 2:
            captures = options[1].split(",")
        elif options[0] == "--b-cprecord" and len(options) >= 2:
            cprecords[1] = options[1]
        else:
            print(__doc__, file=sys.stderr)
            return 2
        options = options[2:]
    backend = args[args.index("--backend") + 1] if "--backend" in args else "cpu"
    with tempfile.TemporaryDirectory() as tmp:
        dbs = [os.path.join(tmp, f"{i}.db") for i in range(2)]
        for db, capture, which in zip(dbs, captures, cprecords):
            record(which, args, db, capture)
        differences, compared, left = compare(*dbs, backend)
    for line in differences[:20]:
        print(line)
    print(f"capture_compare: A = {captures[0]}, B = {captures[1]}: {compared} rank executions "
          f"compared, {len(differences)} differences; {len(left)} not compared (ended "
          f"otherwise or unlike: {'; '.join(left[:6])}{' ...' if len(left) > 6 else ''})")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Prints what the symmetric-memory bugs did on real NCCL windows: one line per case of a
`symmetric` step run (cprecord --json as record.json, cpreplay --all --json as all.json, the store
as run.db in DIR): record verdict, triage verdict, what the ranks said their symmetric pool is,
rank 0's first output hash (a bug whose hash equals its twin's got the right sums), and the kernel
NCCL's tuning log (NCCL_DEBUG_SUBSYS=TUNING, rank 0's stdout) says ran each all-reduce. Used by
run_gpu_checks.sh's `symmetric` step.

  symmetric_table.py DIR
"""
import json
import os
import re
import sqlite3
import sys

# "AllReduce [Symmetric]: 2097152 Bytes -> Kernel AllReduce_RSxLD_AGxST nchannels ..." or
# "AllReduce: 2097152 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}" (NCCL 2.28).
KERNEL = re.compile(r"AllReduce( \[Symmetric\])?: (\d+) Bytes -> (Kernel \S+|Algo \S+ proto \S+)")


def kernels_of(db, execution_id):
    row = db.execute("SELECT stdout_tail FROM rank_result WHERE execution_id = ? AND rank = 0",
                     (execution_id,)).fetchone()
    text = bytes(row[0]).decode("utf-8", "replace") if row and row[0] is not None else ""
    seen = []
    for m in KERNEL.finditer(text):
        line = f"{'sym ' if m.group(1) else ''}{m.group(2)}B {m.group(3)}"
        if line not in seen:
            seen.append(line)
    return seen


def main():
    d = sys.argv[1]
    record = json.load(open(os.path.join(d, "record.json")))
    triage_path = os.path.join(d, "all.json")
    triage = {}
    if os.path.exists(triage_path) and os.path.getsize(triage_path):
        triage = {c["case"]: c for c in json.load(open(triage_path))["cases"]}
    db = sqlite3.connect(os.path.join(d, "run.db"))
    hashes = {}
    bad = 0
    print(f"{'case':36} {'record':20} {'triage':20} {'acc hash':17} pool / NCCL kernels")
    for c in record["cases"]:
        execs = c["executions"]
        first = execs[0] if execs else {}
        outs = (first.get("ranks") or [{}])[0].get("outputs") or []
        h = outs[0]["hash"] if outs else "-"
        if first.get("status") in ("pass", "fail"):
            hashes[c["name"]] = h  # only a completed execution's outputs say anything
        t = triage.get(c["id"], {})
        seeded = c.get("seeded_bug") or ""
        ok = c.get("as_expected") and (not seeded or t.get("verdict") == seeded)
        bad += 0 if ok else 1
        pool = first.get("symmetric_pool", "")
        ks = kernels_of(db, first["id"]) if first else []
        print(f"{c['label']:36} {str(c.get('verdict')):20} {str(t.get('verdict', '-')):20} {h:17} "
              f"{pool[:60]} | {'; '.join(ks) or 'no AllReduce line'}"
              f"{'' if ok else '  <-- NOT AS EXPECTED'}")
    for name, h in hashes.items():
        if name.startswith("bug/"):
            twin = hashes.get("fixed/" + name[4:])
            if twin:
                print(f"{name}: sums {'RIGHT (same as the twin)' if h == twin else 'WRONG (differ from the twin)'}")
    print(f"symmetric: {len(record['cases'])} cases, {bad} not as expected")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

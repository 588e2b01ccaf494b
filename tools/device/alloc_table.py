#!/usr/bin/env python3
"""How torch's tensors were placed in each recording (cprr's arena as torch's CUDA allocator, or
torch's own): per case and database, the tensors made (pool "tensor" allocations of rank 0's first
execution, host tensors included), how many distinct addresses they got and how many were made at an
address an earlier tensor of the execution had (memory freed and reused).
    alloc_table.py NAME=DB [NAME=DB ...]
"""
import sqlite3
import sys


def placements(db):
    """label -> (tensors, distinct addresses, reused) of rank 0's first execution."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT c.label, e.id FROM test_case c JOIN execution e ON e.case_id = c.id "
        "ORDER BY c.id, e.id").fetchall()
    first = {}
    for label, execution in rows:
        first.setdefault(label, execution)
    out = {}
    for label, execution in first.items():
        offsets = [o for (o,) in con.execute(
            "SELECT offset FROM alloc_event WHERE execution_id = ? AND rank = 0 AND is_free = 0 "
            "AND pool = 'tensor' ORDER BY seq", (execution,))]
        seen, reused = set(), 0
        for o in offsets:
            reused += o in seen
            seen.add(o)
        out[label] = (len(offsets), len(seen), reused)
    return out


def main(args):
    named = [a.split("=", 1) for a in args]
    tables = {name: placements(db) for name, db in named}
    labels = sorted({label for t in tables.values() for label in t if label.endswith("@2")})
    print(f"{'case':<36}" + "".join(f"{name:>30}" for name, _ in named))
    print(f"{'':<36}" + "".join(f"{'tensors/addresses/reused':>30}" for _ in named))
    for label in labels:
        cells = []
        for name, _ in named:
            n, distinct, reused = tables[name].get(label, (0, 0, 0))
            cells.append(f"{n}/{distinct}/{reused}")
        print(f"{label:<36}" + "".join(f"{c:>30}" for c in cells))


if __name__ == "__main__":
    main(sys.argv[1:])

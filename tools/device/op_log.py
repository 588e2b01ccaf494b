#!/usr/bin/env python3
"""Prints the op log of each execution of the cases a regex picks from a cprecord database: per
rank, one line per op (seq, stream, kind, name, reads, writes and touches by allocation name,
event), so two captures' logs of one case can be read side by side (diff) on the GPU machine.

    op_log.py DB [LABEL_REGEX] [--mode fresh|pool] [--rank R]
"""

import argparse
import re
import sqlite3
import sys


def _names(con, eid):
    return {(r, b): n for r, b, n in con.execute(
        "SELECT rank, buffer, name FROM alloc_event WHERE execution_id = ? AND NOT is_free",
        (eid,))}


def _by_name(names, rank, ids, spans):
    ids = [i for i in ids.split(",") if i]
    spans = spans.split(",") if spans else [""] * len(ids)
    return ",".join(f"{names.get((rank, int(i)), i)}[{s}]" if s else names.get((rank, int(i)), i)
                    for i, s in zip(ids, spans))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("label", nargs="?", default=".")
    parser.add_argument("--mode", choices=["fresh", "pool"])
    parser.add_argument("--rank", type=int)
    args = parser.parse_args()
    con = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT e.id, c.label, e.mode, e.attempt FROM execution e JOIN test_case c "
        "ON c.id = e.case_id ORDER BY e.id").fetchall()
    for eid, label, mode, attempt in rows:
        if not re.search(args.label, label) or (args.mode and mode != args.mode):
            continue
        print(f"== execution {eid}: {label} {mode} #{attempt}")
        names = _names(con, eid)
        ops = con.execute(
            "SELECT rank, seq, stream, kind, name, reads, read_spans, writes, write_spans, "
            "touches, touch_spans, event FROM op WHERE execution_id = ? ORDER BY rank, seq",
            (eid,))
        for (rank, seq, stream, kind, name, reads, rspans, writes, wspans, touches, tspans,
             event) in ops:
            if args.rank is not None and rank != args.rank:
                continue
            line = f"r{rank} {seq:4d} s{stream:<2d} {kind:<10s} {name}"
            if reads:
                line += f" R:{_by_name(names, rank, reads, rspans)}"
            if writes:
                line += f" W:{_by_name(names, rank, writes, wspans)}"
            if touches:
                line += f" T:{_by_name(names, rank, touches, tspans)}"
            if event >= 0:
                line += f" e{event}"
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

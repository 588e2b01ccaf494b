#!/usr/bin/env python3
"""Puts two `cprecord --mode both --json` documents side by side (cpu vs cuda), one row per case:
status, verdict, whether fresh and pooled differed, and whether both met the case's expectation.
Ends with a count of rows where the backends' verdicts disagree.

    corpus_table.py corpus_cpu.json corpus_cuda.json
"""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"{path}: not a cprecord --json document ({e})")
    return {c["label"]: c for c in doc["cases"]}


def cell(c):
    if c is None:
        return "-"
    mark = "" if c["as_expected"] else " (!)"
    diff = " differs" if c["fresh_vs_pool"] is not None else ""
    return f'{c["status"]}/{c["verdict"] or "-"}{diff}{mark}'


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cpu, cuda = load(sys.argv[1]), load(sys.argv[2])
    labels = list(cuda) + [l for l in cpu if l not in cuda]
    print(f'{"case":48} {"cpu":28} {"cuda":28}')
    disagree = 0
    for label in labels:
        a, b = cpu.get(label), cuda.get(label)
        same = a is not None and b is not None and a["status"] == b["status"] and \
            a["verdict"] == b["verdict"] and (a["fresh_vs_pool"] is None) == (b["fresh_vs_pool"] is None)
        disagree += 0 if same else 1
        print(f'{label:48} {cell(a):28} {cell(b):28}{"" if same else "  <- differs"}')
    unexpected = sum(1 for c in cuda.values() if not c["as_expected"])
    print(f"{len(labels)} cases; cuda: {unexpected} not as expected")
    print(f"cpu vs cuda: {disagree} case(s) with a different status, verdict or fresh-vs-pool flag")


if __name__ == "__main__":
    main()

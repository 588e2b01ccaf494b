#!/usr/bin/env python3
"""Compares cprecord --json documents case by case (status, verdict, every execution's status):
prints the cases that differ from the first document and a last line saying whether all agree."""
import json
import sys


def results(path):
    doc = json.load(open(path))
    out = {}
    for c in doc["cases"]:
        execs = " ".join(f'{e["mode"]}={e["status"]}' for e in c["executions"])
        out[c["label"]] = f'{c["status"]} verdict={c["verdict"]} {execs}'
    return out


def main():
    docs = [(p, results(p)) for p in sys.argv[1:]]
    base_path, base = docs[0]
    differ = 0
    for path, other in docs[1:]:
        for label in sorted(set(base) | set(other)):
            if base.get(label) != other.get(label):
                differ += 1
                print(f"{label}: {base_path}: {base.get(label)} | {path}: {other.get(label)}")
    print(f"{len(base)} cases in {len(docs)} runs: "
          + ("the same results in every run" if differ == 0 else f"{differ} difference(s)"))
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""One line per case of a `cprecord --json` document: label, status of every execution, and how
its collectives travelled (transport and the rank-to-GPU map of the first execution). Exits 1
unless every execution passed. Used by run_gpu_checks.sh's `examples` step.

    examples_table.py examples.json
"""
import json
import sys


def main():
    try:
        doc = json.load(open(sys.argv[1]))
    except (OSError, ValueError, IndexError) as e:
        sys.exit(f"not a cprecord --json document: {e}")
    bad = 0
    for c in doc["cases"]:
        execs = c["executions"]
        statuses = " ".join(f'{e["mode"]}:{e["status"]}' for e in execs)
        first = execs[0] if execs else {}
        bad += sum(1 for e in execs if e["status"] != "pass")
        print(f'{c["label"]:44} {statuses:24} {first.get("collectives", "?")} '
              f'ranks on GPUs {first.get("rank_gpus", "?") or "-"}')
    print(f'{len(doc["cases"])} cases, {bad} execution(s) not passing')
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""One line per case of a `cprecord --json` document: label, status of every execution, the case's
verdict, and how its collectives travelled (transport and the rank-to-GPU map of the first
execution); the race of a case that has one, with its fix. Exits 1 unless every case came out as
expected (a pass, or a seeded bug named). Used by run_gpu_checks.sh's `examples` step.

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
        bad += 0 if c["as_expected"] else 1
        print(f'{c["label"]:44} {statuses:24} {c["verdict"] or "-":12} '
              f'{first.get("collectives", "?")} ranks on GPUs {first.get("rank_gpus", "?") or "-"}')
        if c.get("race"):
            print(f'    race: {c["race"]["detail"]}\n    fix:  {c["race"]["fix"]}'
                  f' (verified: {c["race"].get("fix_verified")})')
    print(f'{len(doc["cases"])} cases, {bad} not as expected')
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

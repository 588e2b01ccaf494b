#!/usr/bin/env python3
"""What `cpreplay --all` said of a recorded run: one line per case it replayed (why it was picked,
the record's verdict, the triage verdict and the verdict the case should get: its seeded bug,
else reproduced, or crash/hang for a fault fixture), then counts; a row whose verdict is not the
expected one is flagged. Exits 1 when one is. Used by run_gpu_checks.sh's `triage` step.

    triage_table.py record.json all.json
"""
import json
import sys


def main():
    try:
        record = json.load(open(sys.argv[1]))
        triage = json.load(open(sys.argv[2]))
    except (OSError, ValueError, IndexError) as e:
        sys.exit(f"usage: triage_table.py record.json all.json ({e})")
    recorded = {c["id"]: c.get("verdict") for c in record["cases"]}
    bad = 0
    print(f"{'case':46} {'picked because':24} {'record':20} {'triage':20} expected")
    for t in triage["cases"]:
        bad += 0 if t["as_expected"] else 1
        print(f'{t["label"]:46} {t["picked_because"][:24]:24} {str(recorded.get(t["case"])):20} '
              f'{str(t["verdict"]):20} {t["expected"]}{"" if t["as_expected"] else "  <-- NOT AS EXPECTED"}')
    print(f'triage: {len(triage["cases"])} of {len(record["cases"])} cases replayed '
          f'({triage["replays"]} replays), {bad} not as expected')
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Prints cprecord --json's cases as a short table (label, statuses, verdict, as expected), or with
--bug-ids the case ids of the seeded bugs at world size 2, for the replays that follow."""
import json
import sys

args = sys.argv[1:]
bug_ids = args and args[0] == "--bug-ids"
with open(args[-1]) as f:
    report = json.load(f)
for c in report["cases"]:
    if bug_ids:
        if c.get("seeded_bug") and c["label"].endswith("@2"):
            print(c["id"])
        continue
    statuses = "/".join(f"{e['mode'][0]}:{e['status']}" for e in c.get("executions", []))
    print(f"{c['label']:<44} {statuses:<24} {str(c.get('verdict')):<20} "
          f"{'ok' if c.get('as_expected') else 'NOT AS EXPECTED'}")
if not bug_ids:
    print(f"exit {report.get('exit_code')}, {report.get('unexpected')} unexpected, "
          f"{report.get('wall_s', 0):.1f} s")

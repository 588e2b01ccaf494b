#!/usr/bin/env python3
"""Prints cprecord --json's executions as a short table for the fault cases: label, mode, status,
wall time, whether as expected, the summary and the note (cut), so a rank's exception, the ranks
released after it and the processes a case left are read at a glance."""
import json
import sys

with open(sys.argv[1]) as f:
    report = json.load(f)
for c in report["cases"]:
    for e in c.get("executions", []):
        print(f"{c['label']:<40} {e['mode']:<5} {e['status']:<5} {e['wall_ms']:>9.1f} ms "
              f"{'ok ' if c.get('as_expected') else 'NOT'} {e.get('summary', '')[:70]}"
              f"{' | ' + e['note'][:140] if e.get('note') else ''}")
print(f"exit {report.get('exit_code')}, {report.get('unexpected')} unexpected, "
      f"{report.get('wall_s', 0):.1f} s")

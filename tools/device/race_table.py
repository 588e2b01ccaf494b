#!/usr/bin/env python3
"""Prints one line per seeded-bug corpus case and twin: what cprecord said (verdict, racing pair,
buffer) and what cpreplay said (verdict, confirmed_by, replays). A seeded case must get its
seeded verdict from both (a stream race also a confirmation in <= 20 replays), a twin none.
Used by run_gpu_checks.sh's `races` step.

  race_table.py RECORD.json REPLAY_DIR     (REPLAY_DIR holds <case id>.json from cpreplay --json)
"""
import json
import os
import sys


def main():
    record = json.load(open(sys.argv[1]))
    replay_dir = sys.argv[2]
    bad = 0
    print(f"{'case':44} {'record':12} {'replay':12} {'confirmed_by':40} replays  pair / buffer")
    for c in record["cases"]:
        path = os.path.join(replay_dir, f"{c['id']}.json")
        rep = json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) else {}
        race = c.get("race") or {}
        seeded_bug = c.get("seeded_bug") or ""
        seeded = seeded_bug == "stream_race"
        conf = (rep.get("race") or rep.get("uninitialized_read") or {}).get("confirmed_by", [])
        pair = ""
        if race:
            pair = f"{race['first']['name']} / {race['second']['name']} on {race['buffer']}"
        ok = (c.get("as_expected") and
              (rep.get("verdict") == (seeded_bug or "reproduced")) and
              (not seeded or (conf and rep.get("replays", 99) <= 20)))
        bad += 0 if ok else 1
        print(f"{c['label']:44} {str(c.get('verdict')):12} {str(rep.get('verdict')):12} "
              f"{','.join(conf) or '-':40} {rep.get('replays', '-'):>7}  {pair}"
              f"{'' if ok else '  <-- NOT AS EXPECTED'}")
    print(f"races: {len(record['cases'])} cases, {bad} not as expected")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

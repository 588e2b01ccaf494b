#!/usr/bin/env python3
"""The Python corpus end to end (ctest's python_corpus): record it, check every verdict, replay
one world size of each seeded bug.

    check_corpus.py --cprecord PATH --cpreplay PATH --corpus corpus/python --db TMP.db

1. ``cprecord --python CORPUS --backend cpu --mode both --json``: every case as expected; a
   case seeded with a bug cprecord judges at record time (allocator_order, uninitialized_read,
   collective_mismatch, stream_race...) has that verdict; a state_leak is a replay verdict, so
   its record verdict is null and its victim (a later grid point polluted by an earlier one in
   the pooled world) shows a fresh-vs-pooled divergence; every other case (fixed/, healthy/) has
   no verdict (null in the JSON) and no divergence.
2. For one world size of each seeded bug, ``cpreplay --db DB --case ID``: its first line
   ``case N <label> (run R): <verdict>`` names the seeded bug, and a state_leak replay names its
   polluters (the earlier grid points of the same case that did not diverge themselves); a
   stream_race replay lists as many other races ("  also:") as the record did.

By default only world sizes <= 2 are recorded (and a case that has none, at its smallest): the
4-rank worlds double the time on a 2-core machine. --max-world-size 0 records them all.
Prints a table; exits 1 on any mismatch, saying which.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

# Verdicts only cpreplay reaches (delta debugging against the case's predecessors).
REPLAY_ONLY = {"state_leak"}
# The verdicts of a case whose expect is a fault: the fault itself, not a bug.
FAULT_VERDICTS = {"crash", "hang"}


def run(cmd, timeout):
    started = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"check_corpus: timed out after {timeout} s: {' '.join(cmd)}")
    return p, time.monotonic() - started


def select(plan, max_world):
    """Labels to record: world sizes <= max_world, or a case's smallest where it has none."""
    if max_world <= 0:
        return [c["label"] for c in plan]
    smallest = {}
    for c in plan:
        smallest[c["name"]] = min(smallest.get(c["name"], c["world_size"]), c["world_size"])
    return [c["label"] for c in plan
            if c["world_size"] <= max_world or c["world_size"] == smallest[c["name"]]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cprecord", required=True)
    ap.add_argument("--cpreplay", required=True)
    ap.add_argument("--corpus", required=True, help="corpus/python (a directory or file)")
    ap.add_argument("--db", required=True, help="SQLite file to record into (replaced)")
    ap.add_argument("--max-world-size", type=int, default=2,
                    help="record world sizes up to this (0: all; default 2)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="cprecord --jobs: worlds side by side (default 1); the verdicts must "
                         "not depend on it")
    args = ap.parse_args()

    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(args.db + suffix):
            os.remove(args.db + suffix)
    os.makedirs(os.path.dirname(os.path.abspath(args.db)), exist_ok=True)

    base = [args.cprecord, "--python", args.corpus, "--backend", "cpu"]
    p, _ = run(base + ["--list", "--json"], 300)
    if p.returncode != 0:
        sys.exit(f"check_corpus: cprecord --list failed ({p.returncode}):\n{p.stderr}")
    plan = json.loads(p.stdout)["plan"]
    labels = select(plan, args.max_world_size)
    if not labels:
        sys.exit(f"check_corpus: {args.corpus} has no cases")
    pattern = "^(" + "|".join(re.escape(label) for label in labels) + ")$"

    p, record_s = run(base + ["--mode", "both", "--db", args.db, "--json", "--filter", pattern,
                              "--jobs", str(args.jobs)], 900)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        sys.exit(f"check_corpus: cprecord printed no JSON (exit {p.returncode}):\n"
                 f"{p.stderr[-4000:]}")
    cases = doc["cases"]
    problems = []
    if p.returncode != 0:
        problems.append(f"cprecord exited {p.returncode} ({doc.get('unexpected')} unexpected)")
    missing = sorted(set(labels) - {c["label"] for c in cases})
    if missing:
        problems.append(f"cprecord recorded no result for: {', '.join(missing)}")

    rows = []  # (label, seeded bug, record verdict, replay verdict, problems of this case)
    for c in cases:
        label, seeded, verdict = c["label"], c["seeded_bug"], c["verdict"]
        mine = []
        if not c["as_expected"]:
            mine.append(f"not as expected (status {c['status']}, verdict {verdict})")
        if c["name"].startswith("bug/") and not seeded:
            mine.append("a bug/ case without seeded_bug")
        if seeded in REPLAY_ONLY:
            if verdict is not None:
                mine.append(f"record verdict {verdict}, expected none ({seeded} is a replay "
                            "verdict)")
        elif seeded:
            if verdict != seeded:
                mine.append(f"record verdict {verdict}, expected the seeded {seeded}")
        else:
            # A case expected to crash or hang has that verdict (the fault corpus); any other
            # verdict on a case with no seeded bug is a finding on a correct case.
            allowed = c["expect"] if c["expect"] in FAULT_VERDICTS else None
            if verdict != allowed:
                mine.append(f"verdict {verdict} on a case with no seeded bug"
                            + (f" (expected {allowed})" if allowed else ""))
            if c["fresh_vs_pool"] is not None:
                mine.append(f"fresh and pooled differ: {c['fresh_vs_pool']['detail']}")
        rows.append([label, seeded or "-", verdict or "none", "", mine])

    # One world size of each seeded bug: the smallest recorded; a state leak at its victim.
    by_label = {c["label"]: c for c in cases}
    replays = {}  # name -> (victim case, expected polluter labels)
    for name in sorted({c["name"] for c in cases if c["seeded_bug"]}):
        instances = [c for c in cases if c["name"] == name]
        seeded = instances[0]["seeded_bug"]
        world = min(c["world_size"] for c in instances)
        at = [c for c in instances if c["world_size"] == world]  # in plan (recorded) order
        if seeded in REPLAY_ONLY:
            victims = [i for i, c in enumerate(at) if c["fresh_vs_pool"] is not None]
            if not victims:
                problems.append(f"{name}@{world}: seeded {seeded}, yet no grid point's pooled "
                                "execution differs from its fresh one")
                continue
            v = victims[0]
            polluters = [c["label"] for c in at[:v] if c["fresh_vs_pool"] is None]
            replays[name] = (at[v], polluters)
        else:
            replays[name] = (at[0], None)

    replay_s = 0.0
    for name, (case, polluters) in replays.items():
        p, seconds = run([args.cpreplay, "--db", args.db, "--case", str(case["id"])], 600)
        replay_s += seconds
        row = next(r for r in rows if r[0] == case["label"])
        first = re.match(r"case (\d+) (\S+) \(run (\d+)\): (\S+)$",
                         p.stdout.splitlines()[0] if p.stdout else "")
        if p.returncode not in (0, 1) or not first:
            row[4].append(f"cpreplay --case {case['id']} exited {p.returncode}: "
                          f"{(p.stdout + p.stderr).strip()[-2000:]}")
            row[3] = "error"
            continue
        got = first.group(4)
        row[3] = got
        if int(first.group(1)) != case["id"] or first.group(2) != case["label"]:
            row[4].append(f"cpreplay replayed case {first.group(1)} {first.group(2)}, "
                          f"asked for {case['id']} {case['label']}")
        if got != case["seeded_bug"]:
            row[4].append(f"replay verdict {got}, expected the seeded {case['seeded_bug']}")
        # Every race of the execution: the record's others ("more") are the replay's "also:".
        more = len((case.get("race") or {}).get("more") or [])
        also = len(re.findall(r"^  also: ", p.stdout, re.M))
        if got == "stream_race" and also != more:
            row[4].append(f"the replay lists {also} other race(s), the record {more}")
        if polluters is not None:
            named = re.findall(r"^    case \d+ (\S+)$", p.stdout, re.M)
            if not re.search(r"^  polluted by \d+ of \d+ predecessor", p.stdout, re.M):
                row[4].append("the state_leak replay names no polluter")
            elif named != polluters:
                row[4].append(f"the replay names polluters {named}, expected {polluters}")
            else:
                row[3] += f" (polluter {', '.join(named)})"

    width = max(len(r[0]) for r in rows)
    print(f"{'case':<{width}}  {'seeded bug':<20} {'record':<20} replay")
    for label, seeded, verdict, replay, mine in rows:
        print(f"{label:<{width}}  {seeded:<20} {verdict:<20} {replay or '-'}"
              f"{'  <- MISMATCH' if mine else ''}")
    print(f"{len(rows)} cases recorded in {record_s:.0f} s (--mode both), {len(replays)} "
          f"replayed in {replay_s:.0f} s; db {args.db}")

    for label, _, _, _, mine in rows:
        problems += [f"{label}: {m}" for m in mine]
    if problems:
        print(f"\ncheck_corpus: {len(problems)} mismatch(es):", file=sys.stderr)
        for m in problems:
            print(f"  {m}", file=sys.stderr)
        return 1
    print("check_corpus: every case as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())

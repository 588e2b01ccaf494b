#!/usr/bin/env python3
"""Checks Chrome trace files written by cprecord/cpreplay --trace against the trace-event format
(the checks of tests/cli/trace_support.h) and prints one row per file: ranks, tracks, timed ops,
collective and race arrows, the span of the timeline, the longest op, and any problems.

    tools/device/trace_check.py FILE...   (exit 1 when a file has a problem)
"""
import json
import sys


def problems(doc):
    out = []
    slices = {}
    flows = {}
    for e in doc.get("traceEvents", []):
        if not all(k in e for k in ("ph", "pid", "tid")):
            out.append("event without ph/pid/tid")
            continue
        ph = e["ph"]
        if ph == "M":
            continue
        if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0:
            out.append("event without ts >= 0")
            continue
        if ph == "X":
            if e.get("dur", -1) < 0:
                out.append("X without dur")
            slices.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["dur"]))
        elif ph in "stf":
            flows.setdefault(e["id"], []).append(e)
        elif ph != "i":
            out.append("unexpected ph " + ph)
    for fid, pts in flows.items():
        phs = [p["ph"] for p in pts]
        if phs.count("s") != 1 or phs.count("f") != 1 or phs[0] != "s" or phs[-1] != "f":
            out.append(f"flow {fid}: {phs}")
        for p in pts:
            if not any(ts <= p["ts"] <= ts + dur for ts, dur in slices.get((p["pid"], p["tid"]), [])):
                out.append(f"flow {fid} point binds to no op")
    return out


def row(path):
    doc = json.load(open(path))
    ev = doc["traceEvents"]
    xs = [e for e in ev if e["ph"] == "X"]
    ranks = {e["pid"] for e in xs}
    tracks = {(e["pid"], e["tid"]) for e in xs}
    arrows = lambda cat: sum(1 for e in ev if e["ph"] == "s" and e.get("cat") == cat)
    span = max((e["ts"] + e["dur"] for e in xs), default=0) - min((e["ts"] for e in xs), default=0)
    longest = max(xs, key=lambda e: e["dur"], default=None)
    bad = problems(doc)
    print(f"{path.split('/')[-1]:<28} ranks={len(ranks)} tracks={len(tracks):<2} ops={len(xs):<3} "
          f"collective_arrows={arrows('collective')} race_arrows={arrows('race')} "
          f"span={span:.0f}us longest={longest['name'] + ' %.0fus' % longest['dur'] if longest else '-'} "
          f"problems={len(bad)}{': ' + bad[0] if bad else ''}")
    return not bad


if __name__ == "__main__":
    ok = all([row(p) for p in sys.argv[1:]])
    sys.exit(0 if ok and len(sys.argv) > 1 else 1)

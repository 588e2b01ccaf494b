#!/usr/bin/env python3
"""Adds up the stack samples of tools/device/stack_sampler (every process of a run) and prints the
frames with the most wall time: inclusive (the frame was on the stack) and own (innermost).

    stack_report.py DIR [--top N] [--match REGEX] [--argv REGEX]

--match keeps frames whose file:function matches (e.g. 'test_|sync|_run|set_up'); --argv keeps
processes whose first arguments match (e.g. 'cprr' for cprr's ranks and their helpers).
"""

import argparse
import json
import os
import re


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--match", default="")
    ap.add_argument("--argv", default="")
    args = ap.parse_args()
    inclusive, own, processes, seconds = {}, {}, 0, 0.0
    for name in os.listdir(args.dir):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(args.dir, name)) as f:
            doc = json.load(f)
        if args.argv and not re.search(args.argv, " ".join(doc["argv"])):
            continue
        processes += 1
        period = doc["period_s"]
        seconds += doc["samples"] * period
        for table, out in ((doc["inclusive"], inclusive), (doc["own"], own)):
            for k, n in table.items():
                out[k] = out.get(k, 0.0) + n * period
    print(f"{processes} processes, {seconds:.1f} s sampled in all")
    pattern = re.compile(args.match) if args.match else None
    for title, table in (("inclusive", inclusive), ("own", own)):
        rows = sorted(((s, k) for k, s in table.items() if not pattern or pattern.search(k)),
                      reverse=True)[:args.top]
        print(f"\n{title} s   frame")
        for s, k in rows:
            print(f"{s:9.2f}   {k}")


if __name__ == "__main__":
    main()

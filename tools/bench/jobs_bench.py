#!/usr/bin/env python3
"""cprecord --jobs: the same plan of short W=2 cases recorded with --jobs 1 and with --jobs N, side
by side in one run, in each mode asked for. Prints each run's wall time, the ratio to the serial
run, and how far it is from the ideal (serial / N); the goal is within 1.3x of it.
Asserts nothing.

    tools/bench/jobs_bench.py --cprecord build/tools/cprecord [--jobs N] [--repeat R]
                              [--modes pool,fresh] [--backend cpu|cuda]

The plan: the corpus's healthy and fixed cases at W=2 (no flood of banners), --repeat R times:
about 44 x R executions per mode.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

PLAN = "^(healthy|fixed)/.*@2$"
EXCLUDE = "banner"


def record(cprecord, backend, mode, jobs, repeat, db):
    argv = [cprecord, "--backend", backend, "--db", db, "--mode", mode, "--jobs", str(jobs),
            "--repeat", str(repeat), "--filter", PLAN, "--exclude", EXCLUDE, "--json"]
    t0 = time.monotonic()
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        sys.stderr.write(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr[-2000:]}\n")
        sys.exit(1)
    executions = done.stdout.count('"attempt"')
    return wall, executions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cprecord", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() // 2 or 1,
                    help="N of --jobs N (default: cores / 2, a W=2 world per two cores)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--modes", default="pool,fresh")
    ap.add_argument("--backend", default="cpu")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="cprr-jobs-bench-") as tmp:
        for mode in a.modes.split(","):
            serial, n = record(a.cprecord, a.backend, mode, 1, a.repeat, f"{tmp}/{mode}-1.db")
            side, m = record(a.cprecord, a.backend, mode, a.jobs, a.repeat,
                             f"{tmp}/{mode}-{a.jobs}.db")
            ideal = serial / a.jobs
            rows.append((mode, n, serial, side, serial / side, side / ideal))
    print(f"backend {a.backend}, {os.cpu_count()} cores, --jobs 1 vs --jobs {a.jobs}, "
          f"--repeat {a.repeat}")
    print("| mode | executions | --jobs 1 (s) | --jobs N (s) | speed-up | vs serial/N (goal <= 1.3) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for mode, n, serial, side, speed, vs in rows:
        print(f"| {mode} | {n} | {serial:.1f} | {side:.1f} | {speed:.2f}x | {vs:.2f}x |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Fresh worlds through a launcher against local ones: the same fresh-mode plan recorded with
--launcher local, mpirun and srun, side by side in one run on this host, for C++ cases (the
corpus) and Python cases (corpus/python). Prints each run's wall time, its time per execution
and its ratio to local; the goal (issue 70) is at most 1.3x local. Asserts nothing.

    tools/bench/launcher_bench.py --build build [--launchers local,mpirun,srun] [--repeat R]

srun needs a Slurm cluster (SLURM_CONF; tests/launch/slurm_cluster.sh start DIR makes a private
one as root); a launcher that is not there is left out, saying why. Each plan is the corpus's
healthy cases at W=2 (--filter '^healthy/.*@2$': the C++ corpus, and corpus/python),
--repeat R times, so that the one-time start of the node agents is spread as a suite's would be.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPP_PLAN = ["--filter", "^healthy/.*@2$", "--exclude", "banner"]
PY_PLAN = ["--python", os.path.join(ROOT, "corpus", "python"), "--filter", "^healthy/.*@2$"]
MPI_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def available(launcher):
    """None when `launcher` can run here, else why not."""
    if launcher == "local":
        return None
    if shutil.which(launcher) is None:
        return f"{launcher} is not on PATH"
    if launcher == "srun" and not os.path.exists(os.environ.get("SLURM_CONF", "")):
        return "no Slurm cluster (SLURM_CONF)"
    return None


def record(cprecord, plan, launcher, repeat, db):
    argv = [cprecord, "--backend", "cpu", "--mode", "fresh", "--repeat", str(repeat), "--json",
            "--db", db, "--launcher", launcher] + plan
    env = dict(os.environ, **MPI_ROOT)
    t0 = time.monotonic()
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        sys.stderr.write(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr[-2000:]}\n")
        return wall, 0
    return wall, done.stdout.count('"attempt"')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--launchers", default="local,mpirun,srun")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    cprecord = os.path.join(a.build, "tools", "cprecord")
    rows, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="cprr-launcher-bench-") as tmp:
        for kind, plan in (("C++", CPP_PLAN), ("Python", PY_PLAN)):
            local = None
            for launcher in a.launchers.split(","):
                why = available(launcher)
                if why:
                    skipped.append(f"{launcher}: {why}")
                    continue
                wall, n = record(cprecord, plan, launcher, a.repeat,
                                 f"{tmp}/{kind}-{launcher}.db")
                if launcher == "local":
                    local = wall
                rows.append((kind, launcher, n, wall, local))
    print(f"fresh mode, cpu backend, W=2, --repeat {a.repeat}, {os.cpu_count()} cores, one host")
    print("| cases | launcher | executions | wall (s) | per execution (s) | vs local (goal <= 1.3) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for kind, launcher, n, wall, local in rows:
        per = f"{wall / n:.2f}" if n else "failed"
        ratio = f"{wall / local:.2f}x" if local and n else "-"
        print(f"| {kind} | {launcher} | {n} | {wall:.1f} | {per} | {ratio} |")
    for s in sorted(set(skipped)):
        print(f"left out: {s}")


if __name__ == "__main__":
    main()

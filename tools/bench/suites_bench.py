#!/usr/bin/env python3
"""Real suites through their own harness against cprecord, time per test side by side in one run
(prints figures and ratios, asserts nothing).

Three suites of 20 short tests at W=2 (tools/bench/suites: each test an all-reduce and a matmul,
checked), each in the style its harness expects and run unchanged by both:

  testcase   a MultiProcessTestCase class: its own harness is ``pytest`` (a process per rank per
             test, spawned); cprr runs it with ``cprecord --python``.
  torchrun   a torchrun script over 20 command lines: its own harness is one ``python -m
             torch.distributed.run --nproc_per_node 2`` per test; cprr runs the case file that
             declares it (cprr.script) with ``cprecord --python``.
  per_rank   a DeepSpeed-style DistributedTest class: its own harness is ``pytest`` (an
             ``mp.Pool`` of 2 forkserver processes per item); cprr runs it with ``cprecord
             --pytest``.

Per test is each configuration's wall time over its tests, everything in it (cprecord's start,
its template and catalog, the world starts; pytest's collection). cprecord runs pooled, then
fresh, on --backend.

    suites_bench.py [--build DIR] [--backend cpu|cuda] [--suites testcase,torchrun,per_rank]
                    [--torchrun-tests N] [--python PATH]

--torchrun-tests N: time only the first N torchrun launches and scale them to 20 (marked so).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SUITES = os.path.join(HERE, "suites")
SOURCE = os.path.dirname(os.path.dirname(HERE))
STAND_INS = os.path.join(SOURCE, "tests", "python", "stand_ins")
TESTS = 20


def timed(cmd, env, cwd):
    """Wall seconds of `cmd`; exits when it fails (a benchmark of a failing run says nothing)."""
    started = time.monotonic()
    run = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    took = time.monotonic() - started
    if run.returncode != 0:
        sys.exit(f"suites_bench: {' '.join(cmd)} exited {run.returncode}:\n{run.stdout[-4000:]}")
    return took


def own_harness(suite, python, env, torchrun_tests):
    """(seconds per test, note) of `suite` through its own harness."""
    folder = os.path.join(SUITES, suite)
    pytest = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if suite == "testcase":
        return timed(pytest + ["test_bench_testcase.py"], env, folder) / TESTS, ""
    if suite == "per_rank":
        return timed(pytest + ["test_bench_items.py"], env, folder) / TESTS, ""
    runs = min(TESTS, torchrun_tests)
    total = sum(timed([python, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                       "--redirects", "1", "--tee", "2", "bench_step.py", "--step", str(i)],
                      env, folder) for i in range(runs))
    return total / runs, "" if runs == TESTS else f"(first {runs}, scaled)"


def with_cprr(suite, mode, build, backend, env, db):
    """Seconds per test of `suite` through cprecord in `mode`."""
    cprecord = os.path.join(build, "tools", "cprecord")
    folder = os.path.join(SUITES, suite)
    what = {"testcase": ["--python", os.path.join(folder, "test_bench_testcase.py")],
            "torchrun": ["--python", os.path.join(folder, "test_bench_torchrun.py")],
            "per_rank": ["--pytest", folder, "--nproc-per-node", "2"]}[suite]
    return timed([cprecord, *what, "--backend", backend, "--mode", mode, "--db", db], env,
                 folder) / TESTS


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--suites", default="testcase,torchrun,per_rank")
    ap.add_argument("--torchrun-tests", type=int, default=TESTS)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    env = dict(os.environ)
    path = [os.path.join(args.build, "python"), STAND_INS, env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if args.backend == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the suites choose gloo and the CPU, as cprecord's cpu
    rows = []
    with tempfile.TemporaryDirectory(prefix="cprr-suites-bench-") as tmp:
        for suite in args.suites.split(","):
            own, note = own_harness(suite, args.python, env, args.torchrun_tests)
            pooled = with_cprr(suite, "pool", args.build, args.backend, env,
                               os.path.join(tmp, f"{suite}.db"))
            fresh = with_cprr(suite, "fresh", args.build, args.backend, env,
                              os.path.join(tmp, f"{suite}.db"))
            rows.append((suite, own, note, fresh, pooled))
            print(f"{suite}: own {own * 1e3:.0f} ms/test {note}, cprr fresh {fresh * 1e3:.0f}, "
                  f"pooled {pooled * 1e3:.0f}", file=sys.stderr, flush=True)
    print(f"{TESTS} tests per suite at W=2, backend {args.backend}; ms per test")
    print(f"{'suite':<10} {'own harness':>12} {'cprr fresh':>11} {'cprr pooled':>12} "
          f"{'own/pooled':>11} {'own/fresh':>10}")
    for suite, own, note, fresh, pooled in rows:
        print(f"{suite:<10} {own * 1e3:>12.0f} {fresh * 1e3:>11.0f} {pooled * 1e3:>12.0f} "
              f"{own / pooled:>10.1f}x {own / fresh:>9.1f}x {note}")


if __name__ == "__main__":
    main()

"""A suite's tests under their own harness and under cprecord, side by side, in one run.

    compare_harness.py --cprecord PATH --file SUITE.py [--every K | --per-class K | --all]
                       [--known DOC]
                       [--env NAME=VALUE]... [--backend cpu|cuda] [--timeout S]
                       [--tests Class.test ...] [--db PATH] [--serial] [--deadline S]

Selects the file's tests (unittest's order; every K-th one, the first included; every K-th
of each class, each class's first included, so a class of few tests is in the sample; or all), runs
them under their own harness (own_harness.py: unittest in one process, the harness's parent
there) and through ``cprecord --python SUITE.py --mode both``, and compares each test's outcome
(pass, skip or fail) with cprr's in each mode. A finding of cprr's (a race, an uninitialized
read, a mismatch, fresh and pooled differing) on a test its own harness passes is a
disagreement too. Prints one row per test (with cprr's seconds in each mode), then the time per
test of each, last. --tests
names the tests instead (a defect's few, to look at again); --db keeps cprecord's database
for cpreplay and the op log. The two harnesses run side by side; --serial runs them one after
the other, for times each harness's alone. --deadline S stops both after S seconds (the own
harness killed, cprecord interrupted as by Ctrl-C, so it reports what ended) and compares the
tests both ended: a call with a time limit (the GPU machine's) still gets its rows. The time per
test is the sum of the compared tests' own times (the own harness's from each test's start to
its end; cprr's each execution's wall, a fresh one's including its world's start) over their
number.

Exits 1 when a test disagrees and is not listed in DOC's table of known differences (a row
``| `Class.test` | cause |``), 0 otherwise: the listed ones are printed with their cause.
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import signal
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def _parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cprecord", required=True)
    ap.add_argument("--file", required=True, help="the suite's test file")
    ap.add_argument("--every", type=int, default=1, help="every K-th test (default: all)")
    ap.add_argument("--per-class", type=int, default=0,
                    help="every K-th test of each class, its first included")
    ap.add_argument("--all", action="store_true", help="every test (as --every 1)")
    ap.add_argument("--known", default="", help="a Markdown file listing known differences")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for both runs")
    ap.add_argument("--backend", default="cpu", help="cprecord --backend")
    ap.add_argument("--timeout", default="", help="cprecord --timeout (default: the harness's)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", default="", help="also write the rows here")
    ap.add_argument("--tests", nargs="+", default=[], help="these tests only (Class.test, or a regex matching the whole name)")
    ap.add_argument("--db", default="", help="keep cprecord's database here")
    ap.add_argument("--deadline", type=float, default=0.0,
                    help="stop both harnesses after S seconds and compare the tests both ended "
                    "(with --serial, the own harness gets 0.6 of it)")
    ap.add_argument("--serial", action="store_true",
                    help="run the two harnesses one after the other, not side by side (per-test "
                    "times each harness's alone)")
    return ap.parse_args(argv)


def _environment(pairs):
    env = dict(os.environ)
    for pair in pairs:
        name, _, value = pair.partition("=")
        env[name] = value
    return env


def selected(args, env):
    """The tests of the file, Class.test, every K-th one in unittest's order."""
    script = (
        "import importlib, json, os, sys, unittest\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.abspath(args.file))!r})\n"
        f"m = importlib.import_module({os.path.splitext(os.path.basename(args.file))[0]!r})\n"
        "loader = unittest.TestLoader()\n"
        "names = [f'{c.__name__}.{t}' for c in vars(m).values()\n"
        "         if isinstance(c, type) and issubclass(c, unittest.TestCase)\n"
        "         and c.__module__ == m.__name__ for t in loader.getTestCaseNames(c)]\n"
        "print(json.dumps(names))\n")
    out = subprocess.run([args.python, "-c", script], env=env, check=True, capture_output=True,
                         text=True)
    names = json.loads(out.stdout.strip().splitlines()[-1])
    if args.tests:
        unknown = [p for p in args.tests if not any(re.fullmatch(p, n) for n in names)]
        if unknown:
            sys.exit(f"compare_harness: --tests matches none of {args.file}'s tests: "
                     f"{', '.join(unknown)} (give Class.test as unittest lists it, or a regex)")
        return [n for n in names if any(re.fullmatch(p, n) for p in args.tests)]
    if args.per_class and not args.all:
        classes = {}
        for n in names:
            classes.setdefault(n.split(".")[0], []).append(n)
        return [n for tests in classes.values() for n in tests[::args.per_class]]
    return names[::1 if args.all else args.every]


def _ends_at(args, share=1.0):
    """The monotonic time a harness must stop by (--deadline, this harness's share of it), or
    None."""
    return time.monotonic() + args.deadline * share if args.deadline else None


def own_run(args, env, tests, ends_at):
    """The own harness's outcomes ({test: outcome}), the seconds of the tests that ended, and
    the test it was running when `ends_at` stopped it ('' when it finished)."""
    # Its own session: a stop at the deadline reaches the harness's spawned children too.
    proc = subprocess.Popen([args.python, os.path.join(HERE, "own_harness.py"), args.file, *tests],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    err_tail = []
    reader = threading.Thread(target=lambda: err_tail.extend(proc.stderr), daemon=True)
    reader.start()
    outcomes, seconds, running, stopped = {}, {}, "", False
    timer = None
    if ends_at is not None:
        timer = threading.Timer(max(ends_at - time.monotonic(), 0.0),
                                lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
    for line in proc.stdout:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a test's own print
        if "start" in record:
            running = record["start"]
        elif "test" in record:
            outcomes[record["test"]] = record["outcome"]
            seconds[record["test"]] = seconds.get(record["test"], 0.0) + record["seconds"]
            running = ""
    status = proc.wait()
    if timer is not None:
        stopped = not timer.is_alive() and status == -signal.SIGKILL
        timer.cancel()
    reader.join(timeout=5)
    if status != 0 and not stopped:
        sys.exit(f"compare_harness: the own harness failed (status {status}):\n"
                 f"{''.join(err_tail)[-4000:]}")
    return outcomes, seconds, running if stopped else ""


def cprr_run(args, env, tests, db, ends_at):
    names = "|".join(re.escape(t) for t in tests)
    # One world at a time, as the own harness runs its tests: the time per test is a sum of the
    # executions' times, which worlds side by side (--jobs, on a machine of many cores) overlap.
    cmd = [args.cprecord, "--python", args.file, "--backend", args.backend, "--mode", "both",
           "--jobs", "1", "--filter", f"^({names})@[0-9]+$", "--db", db, "--json"]
    if args.timeout:
        cmd += ["--timeout", args.timeout]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    # At the deadline, Ctrl-C: cprecord records and reports every execution that ended.
    timer = None
    if ends_at is not None:
        timer = threading.Timer(max(ends_at - time.monotonic(), 0.0),
                                lambda: proc.send_signal(signal.SIGINT))
        timer.start()
    out, err = proc.communicate()
    if timer is not None:
        timer.cancel()
    wall = time.monotonic() - start
    try:
        report = json.loads(out)
    except json.JSONDecodeError:
        sys.exit(f"compare_harness: cprecord gave no report (status {proc.returncode}):\n"
                 f"{err[-4000:]}")
    return report, wall


def _finding(case):
    """cprr's finding on a case, as a short text, or ''."""
    if case.get("verdict"):
        return str(case["verdict"])
    if case.get("fresh_vs_pool"):
        return "fresh and pooled differ"
    return ""


def rows_of(tests, own, report):
    """One row per test: (test, own, fresh, pool, finding, why cprr failed, fresh s, pooled s)."""
    by_name = {c["name"]: c for c in report["cases"]}
    rows = []
    for test in tests:
        executions = (by_name.get(test) or {}).get("executions", [])
        statuses = {e["mode"]: e["status"] for e in executions}
        seconds = {e["mode"]: (e.get("wall_ms") or 0.0) / 1000.0 for e in executions}
        errors = [r.get("error", "") for e in executions
                  for r in e.get("ranks", []) if r.get("outcome") == "fail"]
        rows.append((test, own.get(test, "missing"), statuses.get("fresh", "missing"),
                     statuses.get("pool", "missing"), _finding(by_name.get(test) or {}),
                     (errors[0].strip().splitlines() or [""])[-1] if errors else "",
                     seconds.get("fresh", 0.0), seconds.get("pool", 0.0)))
    return rows


def disagrees(row):
    test, own, fresh, pool, finding = row[:5]
    return fresh != own or pool != own or (own == "pass" and bool(finding))


def known_differences(path):
    """`Class.test` -> cause, from the Markdown table rows of `path`."""
    if not path:
        return {}
    known = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\|\s*`([\w.]+)`\s*\|\s*(.+?)\s*\|\s*$", line)
            if m:
                known[m.group(1)] = m.group(2)
    return known


def _compared(tests, own, report, deadline):
    """The tests to compare: all of them, or under a deadline those both harnesses ended (the
    own harness's outcome and both of cprr's modes)."""
    if not deadline:
        return tests
    modes = {c["name"]: {e["mode"] for e in c.get("executions", [])} for c in report["cases"]}
    return [t for t in tests if t in own and {"fresh", "pool"} <= modes.get(t, set())]


def _run_both(args, env, tests, db):
    """Both harnesses over `tests`: (own outcomes, own seconds per test, the test the own
    harness was stopped in, cprecord's report, cprecord's wall)."""
    if args.serial:
        # The own harness first, to its share of the deadline (it costs several times cprr's
        # both modes per test); cprecord then runs the tests it ended, to the deadline.
        ends_at = _ends_at(args)
        own, own_s, stopped_in = own_run(args, env, tests, _ends_at(args, 0.6))
        ran = [t for t in tests if t in own] if args.deadline else tests
        report, cprr_s = cprr_run(args, env, ran, db, ends_at) if ran else ({"cases": []}, 0.0)
        return own, own_s, stopped_in, report, cprr_s
    # The two harnesses side by side: each waits much of its time (processes starting, a
    # rendezvous), and neither shares anything with the other (the own harness meets its ranks
    # in files, cprecord's get their own port).
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        own_future = pool.submit(own_run, args, env, tests, _ends_at(args))
        cprr_future = pool.submit(cprr_run, args, env, tests, db, _ends_at(args))
        own, own_s, stopped_in = own_future.result()
        report, cprr_s = cprr_future.result()
    return own, own_s, stopped_in, report, cprr_s


def main(argv):
    args = _parse(argv)
    env = _environment(args.env)
    selection = selected(args, env)
    with tempfile.TemporaryDirectory() as tmp:
        own, own_s, stopped_in, report, cprr_s = _run_both(
            args, env, selection, args.db or os.path.join(tmp, "compare.db"))
    tests = _compared(selection, own, report, args.deadline)
    rows = rows_of(tests, own, report)
    known = known_differences(args.known)
    print(f"{'test':<72} {'own':<5} {'fresh':<5} {'pool':<5} {'fresh s':>7} {'pool s':>6} agree")
    unexplained = []
    for row in rows:
        agree = not disagrees(row)
        note = "" if agree else (f"known: {known[row[0]]}" if row[0] in known else
                                 f"NO {row[4]} {row[5]}".rstrip())
        print(f"{row[0]:<72} {row[1]:<5} {row[2]:<5} {row[3]:<5} {row[6]:7.2f} {row[7]:6.2f} "
              f"{'yes' if agree else note}")
        if not agree and row[0] not in known:
            unexplained.append(row[0])
    wall = {"fresh": sum(r[6] for r in rows), "pool": sum(r[7] for r in rows)}
    own_total = sum(own_s.get(t, 0.0) for t in tests)
    n = max(len(tests), 1)
    agreeing = sum(not disagrees(r) for r in rows)
    if len(tests) < len(selection):
        print(f"\n--deadline {args.deadline:g} s: {len(tests)} of the {len(selection)} selected "
              f"tests ended under both harnesses; the own harness ended {len(own)}"
              + (f" and was stopped in {stopped_in}" if stopped_in else ""))
    print(f"\n{len(tests)} tests; cprr agrees with the own harness on {agreeing} in both modes; "
          f"{len(unexplained)} unexplained")
    print(f"time per test: own harness {own_total / n:.2f} s, cprr fresh "
          f"{wall['fresh'] / n:.2f} s, pooled {wall['pool'] / n:.2f} s "
          f"(own / pooled {own_total / max(wall['pool'], 1e-9):.1f}x); cprecord's wall "
          f"{cprr_s:.0f} s for both modes")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "own_s": own_total, "cprr_s": cprr_s, "wall": wall,
                       "selected": len(selection), "stopped_in": stopped_in}, f)
    if unexplained:
        print("unexplained: " + ", ".join(unexplained), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

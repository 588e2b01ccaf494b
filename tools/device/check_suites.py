#!/usr/bin/env python3
"""corpus/suites on a backend, as a user runs them: each suite through cprecord in both modes,
every planted bug checked for its verdict (a leak: fresh passes, pooled fails, and cpreplay says
state_leak naming its polluter; a mismatch: collective_mismatch), every skip a skip, every other
case clean; then the continuous class under its own harness (torch >= 2.8 has it). Prints a table
last; exits 1 when a check fails. (tests/python/test_suites.py and its siblings check the same on
cpu in CI.)

    check_suites.py --build DIR [--backend cuda|cpu] [--out DIR] [--suites testcase,...]
                    [--filter REGEX] [--no-own-harness]
"""

import argparse
import json
import os
import subprocess
import sys

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITES = os.path.join(SOURCE, "corpus", "suites")
STAND_INS = os.path.join(SOURCE, "tests", "python", "stand_ins")

# Per suite: cprecord's arguments, leak victim -> polluter, mismatches, labels that skip or
# (on a machine with the GPUs they need) pass.
SUITE_CHECKS = {
    "testcase": {
        "args": ["--python", os.path.join(SUITES, "testcase"), "--timeout", "60"],
        "leaks": {"ReduceSuiteTest.test_scaled_sum@2": "ReduceSuiteTest.test_amax_updates_scales@2",
                  "ContinuousSuiteTest.test_b_gather_hidden@2":
                  "ContinuousSuiteTest.test_a_gather_tokens@2"},
        "mismatches": ["ReduceSuiteTest.test_shard_stats@2"],
        "skips": ["ReduceSuiteTest.test_eight_gpus@2"],
    },
    "torchrun": {
        "args": ["--python", os.path.join(SUITES, "torchrun")],
        "leaks": {"cp_attention{argv=--format bshd --config cp_1_0}@2":
                  "cp_attention{argv=--format thd --config cp_1_0}@2"},
        "mismatches": [], "skips": [],
    },
    "per_rank": {
        "args": ["--pytest", os.path.join(SUITES, "per_rank"), "--nproc-per-node", "2"],
        "leaks": {"corpus/suites/per_rank/test_items.py::TestZeroBuckets::test_b_default_buckets@2":
                  "corpus/suites/per_rank/test_items.py::TestZeroBuckets::test_a_small_buckets@2"},
        "mismatches": [],
        "skips": ["corpus/suites/per_rank/test_items.py::TestCheckpoint::test_eight_gpus@2"],
    },
}


def run(cmd, env, timeout=600):
    return subprocess.run(cmd, env=env, cwd=SOURCE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def check_suite(name, spec, a, env):
    """The problems of one suite (texts) and its row."""
    db = os.path.join(a.out, f"suite_{name}.db")
    if os.path.exists(db):
        os.remove(db)
    rec = run([os.path.join(a.build, "tools", "cprecord"), *spec["args"], "--backend", a.backend,
               "--mode", "both", "--db", db, "--json", "--filter", a.filter], env)
    with open(os.path.join(a.out, f"suite_{name}.err"), "w") as f:
        f.write(rec.stderr)
    try:
        cases = {c["label"]: c for c in json.loads(rec.stdout)["cases"]}
    except (json.JSONDecodeError, KeyError):
        return [f"{name}: cprecord exited {rec.returncode}: {rec.stderr[-2000:]}"], (name, 0, 0)
    problems = []
    for victim, polluter in spec["leaks"].items():
        if victim not in cases and a.filter != ".":
            continue  # --filter left it out
        case = cases.get(victim)
        modes = {e["mode"]: e["status"] for e in (case or {}).get("executions", [])}
        if modes != {"fresh": "pass", "pool": "fail"}:
            problems.append(f"{victim}: fresh/pooled {modes}, want pass/fail")
            continue
        replay = run([os.path.join(a.build, "tools", "cpreplay"), "--db", db, "--case",
                      str(case["id"])], env)
        first = (replay.stdout.splitlines() or [""])[0]
        if not first.endswith("state_leak") or polluter not in replay.stdout:
            problems.append(f"{victim}: replay said {replay.stdout.strip()[:300]!r}")
    for label in spec["mismatches"]:
        if label not in cases and a.filter != ".":
            continue
        verdict = cases.get(label, {}).get("verdict")
        if verdict != "collective_mismatch":
            problems.append(f"{label}: verdict {verdict}, want collective_mismatch")
    for label, case in cases.items():
        if label in spec["leaks"] or label in spec["mismatches"]:
            continue
        wanted = ("skip", "pass") if label in spec["skips"] else ("pass",)
        if case["status"] not in wanted or case.get("verdict") or case.get("fresh_vs_pool"):
            problems.append(f"{label}: status {case['status']}, verdict {case.get('verdict')}, "
                            f"fresh_vs_pool {bool(case.get('fresh_vs_pool'))}: "
                            + "; ".join(e.get("summary", "") for e in case["executions"])[:400])
    return problems, (name, len(cases), len(problems))


def own_continuous_harness(env):
    """The continuous class under torch's own harness (pytest), when torch has one: its
    summary line, and whether it failed as the planted leak says (only the victim)."""
    code = "import torch.testing._internal.common_distributed as c; " \
           "print(hasattr(c, 'MultiProcContinuousTest'))"
    if run([sys.executable, "-c", code], env).stdout.strip() != "True":
        return "no MultiProcContinuousTest in this torch", True
    p = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             os.path.join(SUITES, "testcase", "test_continuous_suite.py")], env)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    failed = [line for line in p.stdout.splitlines() if line.startswith("FAILED")]
    return last, len(failed) == 1 and "test_b_gather_hidden " in failed[0] + " "


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--out", default="/tmp/cprr-suites")
    ap.add_argument("--suites", default=",".join(SUITE_CHECKS), help="which, comma-separated")
    ap.add_argument("--filter", default=".", help="cprecord --filter (checks what it keeps)")
    ap.add_argument("--no-own-harness", action="store_true",
                    help="skip the continuous class under its own harness")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=os.pathsep.join(
        [os.path.join(a.build, "python"), STAND_INS, os.environ.get("PYTHONPATH", "")]))
    problems, rows = [], []
    for name, spec in SUITE_CHECKS.items():
        if name not in a.suites.split(","):
            continue
        wrong, row = check_suite(name, spec, a, env)
        for p in wrong:  # as each suite ends: a run cut short still says something
            print("PROBLEM:", p, flush=True)
        print(f"{name}: {row[1]} cases, {row[2]} problems", flush=True)
        problems += wrong
        rows.append(row)
    harness, as_planted = ("not run", True) if a.no_own_harness else \
        own_continuous_harness(env)
    if not as_planted:
        problems.append(f"continuous class under its own harness: {harness}")
    print(f"{'suite':<10} {'cases':>5} {'problems':>8}   (backend {a.backend}, mode both)")
    for name, n, bad in rows:
        print(f"{name:<10} {n:>5} {bad:>8}")
    print(f"continuous class, own harness: {harness} ({'as planted' if as_planted else 'NOT'})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

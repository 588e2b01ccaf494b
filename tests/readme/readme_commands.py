#!/usr/bin/env python3
"""Runs every command line README.md shows in a ```sh block, as written, so the README cannot
drift from what the build does (ctest readme_commands_run_as_written).

    readme_commands.py --source SRC --build BUILD --work DIR

The commands run in order in DIR, a scratch folder that looks like a checkout whose build is
BUILD (build/, corpus/, examples/, tests/ and tools/ link there), with HOME=DIR/home, PATH=/usr/bin:/bin
and nothing of cprr's in the environment: a new user's shell. Every line must match one rule
below, which says what it must do (its exit code, the files it leaves) or why CI cannot run it
(other hosts, GPUs); a line no rule knows fails the test, naming the line. A placeholder (N) is
what the README says to put there. README's Python commands also run from the installed prefix
(from_prefix), each beside the commands that follow it, on a port of its own. Exits 1 naming
each command that did not do what its rule says; prints one line per command.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import threading
import time


class Rule:
    """What a README line must do: `pattern` finds it; `codes`: the exit codes it may end with
    (None: not run here, `why` says why); `makes`: files it must leave in the work folder."""

    def __init__(self, pattern, codes=(0,), makes=(), why=""):
        self.pattern = re.compile(pattern)
        self.codes = codes
        self.makes = makes
        self.why = why


RULES = [
    # The set-up commands: CI runs the test command (.ci/run); the main job's build is this
    # build, and its run (what follows the build) runs here.
    Rule(r"^tools/setup\.sh && cmake -S \. -B build && cmake --build build -j\"\$\(nproc\)\" && "
         r"ctest --test-dir build --output-on-failure -j\"\$\(nproc\)\"$", None,
         why="the test command: CI runs it (.ci/run holds this line)"),
    Rule(r"^tools/setup\.sh && cmake -S \. -B build && cmake --build build .*--target cprecord "
         r"cpreplay cpworker && (build/tools/cprecord .*)$", (0,),
         makes=("cprr.db", "cprr-junit.xml")),
    # A first session.
    Rule(r"^build/tools/cprecord --backend cpu --mode both --filter 'cp_maxlogit_race@2' "
         r"--db demo\.db$", (0,), makes=("demo.db",)),
    Rule(r"^build/tools/cpreplay --db demo\.db --case N$", (1,)),
    Rule(r"^build/tools/cpreplay --db demo\.db --case N --trace race\.json$", (1,),
         makes=("race.json",)),
    # The installed package.
    Rule(r"^cmake --install build --prefix \"\$HOME/cprr\"", (0,), makes=("home/cprr/bin/cprecord",)),
    Rule(r"^cmake -S examples -B build-examples", (0,), makes=("build-examples/my_cases",)),
    Rule(r"^\"\$HOME/cprr/bin/cprecord\" --worker build-examples/my_cases", (0,),
         makes=("mine.db",)),
    # Python cases.
    Rule(r"^build/tools/cprecord --python corpus/python ", (0,), makes=("py.db",)),
    Rule(r"^build/tools/cpreplay --db py\.db --case 3 ", (0, 1)),
    Rule(r"^PYTHONPATH=build/python /usr/bin/python3 -m pytest -p cprr\.pytest_plugin corpus/python ",
         (0,)),
    # Suites run unchanged: their planted bugs are unexpected failures (exit 1).
    Rule(r"^PYTHONPATH=tests/python/stand_ins build/tools/cprecord --python corpus/suites/testcase ",
         (1,), makes=("suites.db",)),
    # PyTorch's own DistributedTest: a sample that passes under its own harness passes here.
    Rule(r"^BACKEND=gloo WORLD_SIZE=2 PYTHONPATH=tests/python/stand_ins build/tools/cprecord "
         r"--python tests/python/upstream/dist_backend_spawn\.py ", (0,), makes=("suites.db",)),
    Rule(r"^build/tools/cprecord --python corpus/suites/torchrun ", (1,), makes=("suites.db",)),
    Rule(r"^build/tools/cprecord --torchrun corpus/suites/torchrun/", (0,), makes=("suites.db",)),
    Rule(r"^build/tools/cprecord --pytest corpus/suites/per_rank ", (1,), makes=("suites.db",)),
    Rule(r"^PYTHONPATH=build/python /usr/bin/python3 -m pytest -p cprr\.pytest_plugin "
         r"corpus/suites/per_rank ", (1,)),
    # Many hosts: a cluster's commands, cprecord on its PATH.
    Rule(r"^cprecord .*--launcher (mpirun|srun)", None,
         why="a cluster's command: other hosts, GPUs, an allocation"),
]


def readme_lines(path):
    """The command lines of README.md's ```sh blocks, comments and blank lines left out."""
    lines, inside = [], False
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("```"):
                inside = line.strip() == "```sh"
                continue
            if inside and line.strip() and not line.lstrip().startswith("#"):
                lines.append(line.strip())
    return lines


def from_prefix(command, prefix):
    """The Python commands again from the installed prefix (README's install line put it there):
    the pytest command with the prefix's package, --python corpus/python with the prefix's
    cprecord and no PYTHONPATH (its cprr-pyworker finds its own package). None for any other
    command."""
    if command.startswith("PYTHONPATH=build/python "):
        return command.replace("build/python", f"{prefix}/lib/cprr/python", 1)
    if command.startswith("build/tools/cprecord --python corpus/python "):
        return (command.replace("build/tools/cprecord", f"{prefix}/bin/cprecord", 1)
                .replace("--db py.db", "--db py-installed.db"))
    return None


def workspace(source, build, work):
    """A new folder that looks like a fresh checkout built into `build`."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "home"))
    for name, target in (("build", build), ("corpus", os.path.join(source, "corpus")),
                         ("examples", os.path.join(source, "examples")),
                         ("tools", os.path.join(source, "tools")),
                         ("tests", os.path.join(source, "tests"))):
        link = os.path.join(work, name)
        if not os.path.lexists(link):
            os.symlink(target, link)


# The installed prefix's runs (from_prefix) take ports from here up: torchrun's default is the
# README commands' own.
AGAIN_PORT = 29240
LOG_LOCK = threading.Lock()


def run(line, work, env, log):
    """Runs `line` through bash in `work`; returns its exit code, output and seconds taken."""
    started = time.monotonic()
    p = subprocess.run(["bash", "-c", line], cwd=work, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    seconds = time.monotonic() - started
    with LOG_LOCK, open(log, "a") as f:
        f.write(f"$ {line}\n{p.stdout}\n[exit {p.returncode}, {seconds:.1f} s]\n")
    return p.returncode, p.stdout, seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    source, build, work = (os.path.abspath(p) for p in (a.source, a.build, a.work))
    workspace(source, build, work)
    env = {"PATH": "/usr/bin:/bin", "HOME": os.path.join(work, "home"), "LANG": "C.UTF-8",
           # Nothing written into the source tree through the links: no bytecode, no pytest cache.
           "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_ADDOPTS": "-p no:cacheprovider"}
    log = os.path.join(work, "readme_commands.log")
    with open(os.path.join(source, ".ci", "run")) as f:
        ci = f.read()
    problems, placeholders = [], {}
    # The installed prefix's runs of the Python commands (from_prefix), each in the background.
    pool, pending = concurrent.futures.ThreadPoolExecutor(max_workers=4), []
    for line in readme_lines(os.path.join(source, "README.md")):
        rules = [r for r in RULES if r.pattern.search(line)]
        if len(rules) != 1:
            problems.append(f"README line known to {len(rules)} rules (want 1): {line}")
            continue
        rule = rules[0]
        if rule.codes is None:
            if "test command" in rule.why and line not in ci:
                problems.append(f".ci/run does not run README's test command: {line}")
            print(f"not run ({rule.why}): {line}")
            continue
        # The main job: what follows its build steps (this build) runs.
        command = rule.pattern.search(line).group(1) if rule.pattern.groups else line
        for name, value in placeholders.items():
            command = re.sub(rf"\b{name}\b", value, command)
        code, out, seconds = run(command, work, env, log)
        missing = [m for m in rule.makes if not os.path.exists(os.path.join(work, m))]
        ok = code in rule.codes and not missing
        print(f"{'ok' if ok else 'FAILED'} (exit {code}, {seconds:.0f} s): {command}")
        if not ok:
            problems.append(f"{command}: exit {code} (want {' or '.join(map(str, rule.codes))})"
                            + (f", left no {', '.join(missing)}" if missing else "")
                            + f"; the last of its output:\n{out[-1500:]}")
        # README: the table names the race's case as "case N (bug/cp_maxlogit_race@2): ...".
        found = re.search(r"case (\d+) \(bug/cp_maxlogit_race@2\)", out)
        if found:
            placeholders["N"] = found.group(1)
        again = from_prefix(command, os.path.join(env["HOME"], "cprr"))
        if again:
            # Beside the next commands, which it shares no file with, on a port of its own.
            port = str(AGAIN_PORT + len(pending))
            pending.append((again, rule, pool.submit(run, again, work,
                                                     dict(env, CPRR_MASTER_PORT=port), log)))
    for again, rule, future in pending:
        code, out, seconds = future.result()
        print(f"{'ok' if code in rule.codes else 'FAILED'} (exit {code}, {seconds:.0f} s): "
              f"{again}")
        if code not in rule.codes:
            problems.append(f"{again}: exit {code} (want {' or '.join(map(str, rule.codes))})"
                            f"; the last of its output:\n{out[-1500:]}")
    pool.shutdown()
    for p in problems:
        print("README:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

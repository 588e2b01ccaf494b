"""pytest plugin: ``@cprr.case`` functions as pytest items, run through cprecord.

Enable it with ``pytest -p cprr.pytest_plugin`` (the package on PYTHONPATH: build/python, or the
installed lib/cprr/python). Every ``@cprr.case`` in the collected test files becomes one item per
case instance (grid point x world size), named by its label ``name{k=v}@w``; so does every test
method of a class of PyTorch's multi-process TestCase family (``Class.test_method@w``,
cprr.suites.testcase) instead of the unittest item that would spawn its own processes, and every
``cprr.script`` declaration (``name{argv=ARGS}@w``). With ``--cprr-nproc-per-node N``, every other
test item becomes a per-rank case too (``NODEID@w``, as ``cprecord --pytest`` runs it: in every rank
of a world, for suites written for ``torchrun -m pytest`` or DeepSpeed's DistributedTest). The first
item to run records every selected instance in one ``cprecord --python`` run (and one
``cprecord --pytest`` run for per-rank items; pooled by default,
``--cprr-mode both`` for the fresh-vs-pooled differential); each item then passes when cprr judged
its case as expected, and fails with the verdict, the finding and the ``cpreplay --case`` command
that replays it. pytest's own ``--junitxml`` reports them.

Options: --cprr-mode pool|fresh|both, --cprr-db PATH (default: a file in pytest's temporary
directory, which pytest prunes after three runs; without pytest's tmpdir plugin, a folder removed
when the session ends), --cprr-backend auto|cpu|cuda, --cprr-cprecord PATH (default: $CPRR_CPRECORD,
then the cprecord of the build tree or prefix this package is in, then cprecord next to
cprr-pyworker or on PATH), --cprr-arg ARG (repeatable: passed to cprecord), --cprr-nproc-per-node N
(repeatable: the world sizes of a per-rank item that names none by a world_size marker or class
attribute; without it, plain test items run as pytest runs them).
"""

import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from cprr.api import case as _case
from cprr.suites import pytest_items as _pytest_items
from cprr.suites import testcase as _suites

_STATE = {}


def pytest_addoption(parser):
    group = parser.getgroup("cprr", "cprr: multi-rank cases recorded and judged by cprecord")
    group.addoption("--cprr-mode", default="pool", choices=("pool", "fresh", "both"),
                    help="how cprecord runs the cases (default: pool; both: fresh and pooled, "
                    "flagging cases whose results differ)")
    group.addoption("--cprr-db", default=None, help="SQLite file cprecord records into")
    group.addoption("--cprr-backend", default="auto", choices=("auto", "cpu", "cuda"),
                    help="cprecord --backend")
    group.addoption("--cprr-cprecord", default=None, help="the cprecord executable")
    group.addoption("--cprr-arg", action="append", default=[],
                    help="an extra cprecord argument (repeatable), e.g. --cprr-arg=--repeat=3")
    group.addoption("--cprr-nproc-per-node", action="append", type=int, default=None,
                    metavar="N",
                    help="run every plain test item in every rank of a world, as cprecord "
                    "--pytest does (torchrun -m pytest, DeepSpeed's DistributedTest): N is the "
                    "world size of an item with no world_size marker or class attribute "
                    "(repeatable: a case per size)")


def labels_of(definition):
    """The labels cprecord's plan gives this case: 'name{k=v,k2=v2}@w' per grid point and world
    size, parameters ordered by name (data/case_info.h)."""
    axes = sorted(definition.grid_text())
    points = itertools.product(*[[(axis, v) for v in values] for axis, values in axes])
    out = []
    for point in points:
        params = ",".join(f"{k}={v}" for k, v in point)
        for w in definition.world_sizes:
            out.append(f"{definition.name}{{{params}}}@{w}" if params else f"{definition.name}@{w}")
    return out


def _beside_package():
    """Where the cprecord of this package would be, nearest first: the build tree's
    (build/python/cprr -> build/tools/cprecord) and an installed prefix's
    (PREFIX/lib/cprr/python/cprr -> PREFIX/bin/cprecord)."""
    here = os.path.dirname(os.path.realpath(__file__))
    out = []
    for _ in range(4):
        here = os.path.dirname(here)
        out += [os.path.join(here, "tools", "cprecord"), os.path.join(here, "bin", "cprecord")]
    return out


def _cprecord(config):
    """The cprecord to run: --cprr-cprecord, $CPRR_CPRECORD, the one that belongs to this package
    (so a build tree's plugin runs that build's cprecord, whatever PATH says), the one beside
    cprr-pyworker on PATH, cprecord on PATH."""
    given = config.getoption("--cprr-cprecord") or os.environ.get("CPRR_CPRECORD")
    if given:
        return given
    looked = _beside_package()
    worker = shutil.which("cprr-pyworker")
    if worker:
        looked.append(os.path.join(os.path.dirname(os.path.realpath(worker)), "cprecord"))
    for candidate in looked:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("cprecord")
    if not found:
        raise pytest.UsageError(
            "cprr: cprecord not found: looked at " + ", ".join(looked) + " and on PATH; pass "
            "--cprr-cprecord PATH or set CPRR_CPRECORD")
    return found


class CprrCaseItem(pytest.Item):
    def __init__(self, *, label, definition, **kwargs):
        super().__init__(**kwargs)
        self.label = label
        self.definition = definition

    def runtest(self):
        results = _record(self.session, self.config)
        case = results["cases"].get(self.label)
        if case is None:
            raise CprrCaseFailure(
                f"{self.label}: cprecord recorded no such case ({results['problem']})")
        if not case.get("as_expected"):
            raise CprrCaseFailure(_describe(case, results))
        if case.get("status") == "skip":  # skipped on every rank: a skip here too
            summary = next((e.get("summary") for e in case.get("executions", [])), "")
            pytest.skip(summary or "skipped")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CprrCaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.fspath, None, f"cprr case {self.label}"


class CprrPerRankItem(CprrCaseItem):
    """A plain test item run by cprecord --pytest in every rank (definition None). A suite's own
    hooks see an item that is not theirs to run: no class (DeepSpeed's pytest_runtest_call runs
    an item whose cls is a DistributedTest itself) and no markers (a harness that forks an item
    with a world_size marker); pytest's -k and -m chose among the original items already."""

    cls = None

    def iter_markers_with_node(self, name=None):
        return iter(())


class CprrCaseFailure(Exception):
    pass


def _describe(case, results):
    lines = [f"{case['label']}: status {case.get('status')}, verdict {case.get('verdict') or 'none'}"
             f"{' (seeded bug: ' + case['seeded_bug'] + ')' if case.get('seeded_bug') else ''}"]
    for key in ("race", "allocation", "uninitialized_read", "collective_mismatch",
                "fresh_vs_pool"):
        finding = case.get(key)
        if finding:
            lines.append(f"  {key}: {finding.get('detail', finding)}")
    shown = set()
    for e in case.get("executions", []):
        if e.get("counts_against_run") and e.get("summary"):
            lines.append(f"  {e['mode']} execution {e['id']}: {e['summary']}")
            rank, text = _failure_text(e)
            if text and text not in shown:  # the summary has its last line only
                shown.add(text)
                lines.append(f"  rank {rank}:")
                lines.extend("    " + line for line in text.splitlines())
    if results.get("removed_at_end"):
        lines.append(f"  replay: the database ({results['db']}) is removed when the session ends: "
                     f"pass --cprr-db PATH to keep it, then cpreplay --db PATH --case {case['id']}")
    else:
        lines.append(f"  replay: cpreplay --db {results['db']} --case {case['id']}")
    return "\n".join(lines)


def _failure_text(execution):
    """(rank, whole traceback) of the rank an execution's summary names (an error over a fail,
    the lowest rank), when it is more than one line; (None, None) otherwise."""
    for outcome in ("error", "fail"):
        for r in execution.get("ranks", []):
            text = (r.get("error") or "").rstrip("\n")
            if r.get("outcome") == outcome:
                return (r.get("rank"), text) if "\n" in text else (None, None)
    return None, None


def _record(session, config):
    if "results" in _STATE:
        return _STATE["results"]
    items = [i for i in session.items if isinstance(i, CprrCaseItem)]
    db = config.getoption("--cprr-db") or _default_db(config)
    results = {"db": db, "cases": {}, "problem": "",
               "removed_at_end": os.path.dirname(db) in _STATE.get("own_folders", [])}
    cases = [i for i in items if not isinstance(i, CprrPerRankItem)]
    per_rank = [i for i in items if isinstance(i, CprrPerRankItem)]
    if cases:
        _run_cprecord(config, db, ["--python", *sorted({str(i.fspath) for i in cases})], cases,
                      results)
    if per_rank:
        # The ranks' pytest collects from this session's root (and ini file): the same node ids.
        pytest_args = ["--rootdir", str(config.rootpath)]
        if config.inipath:
            pytest_args += ["-c", str(config.inipath)]
        sizes = [str(n) for n in config.getoption("--cprr-nproc-per-node")]
        _run_cprecord(config, db, ["--pytest", *sorted({str(i.fspath) for i in per_rank}),
                                   "--nproc-per-node", *sizes], per_rank, results,
                      after=["--", *pytest_args])
    _STATE["results"] = results
    return results


def _run_cprecord(config, db, what, items, results, after=()):
    """One cprecord run over `items` (their labels as its --filter); its cases, or why there
    are none, into `results`."""
    labels = sorted({i.label for i in items})
    cmd = [_cprecord(config), *what, "--mode", config.getoption("--cprr-mode"),
           "--backend", config.getoption("--cprr-backend"), "--db", db, "--json",
           "--filter", "^(" + "|".join(re.escape(label) for label in labels) + ")$",
           *config.getoption("--cprr-arg"), *after]
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        report = json.loads(run.stdout)
        results["cases"].update({c["label"]: c for c in report.get("cases", [])})
    except json.JSONDecodeError:
        results["problem"] += (f"cprecord {what[0]} exited {run.returncode}: "
                               f"{run.stderr.strip()[-4000:] or run.stdout.strip()[-4000:]}")


def _default_db(config):
    """A file in pytest's temporary directory, which pytest prunes (it keeps the last three
    runs, so the replay command a failure prints finds the file afterwards); without pytest's
    tmpdir plugin, a folder of cprr's own, removed when the session ends."""
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        return str(factory.mktemp("cprr") / "cprr.db")
    folder = tempfile.mkdtemp(prefix="cprr-")
    _STATE.setdefault("own_folders", []).append(folder)
    return os.path.join(folder, "cprr.db")


def pytest_unconfigure(config):
    for folder in _STATE.pop("own_folders", []):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_pycollect_makeitem(collector, name, obj):
    if not isinstance(collector, pytest.Module):
        return None
    definition = getattr(obj, "__cprr_case__", None)
    if definition is not None:
        definitions = [definition]
    elif _suites.is_test_class(obj, collector.module.__name__):
        definitions, problems = _suites.class_definitions(obj)
        if problems:
            raise collector.CollectError("\n".join(problems))
    else:
        return None
    return [CprrCaseItem.from_parent(collector, name=label, label=label, definition=d)
            for d in definitions for label in labels_of(d)]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A test module's cprr.script declarations (calls, not attributes pycollect sees) as items
    after the module's own: its import (during its collection) registered them."""
    outcome = yield
    report = outcome.get_result()
    if not isinstance(collector, pytest.Module) or report.outcome != "passed":
        return
    report.result.extend(
        CprrCaseItem.from_parent(collector, name=label, label=label, definition=d)
        for d in _case.declared_in(str(collector.path)) for label in labels_of(d))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """With --cprr-nproc-per-node, each selected plain item becomes a per-rank case per world
    size (after -k and -m chose, and after other plugins reordered)."""
    sizes = config.getoption("--cprr-nproc-per-node")
    if not sizes:
        return
    out = []
    for item in items:
        if isinstance(item, CprrCaseItem):
            out.append(item)
            continue
        name = _pytest_items.case_name(item)
        for w in _pytest_items.world_sizes_of(item, sizes):
            label = f"{name}@{w}"
            out.append(CprrPerRankItem.from_parent(item.parent, name=f"{item.name}@{w}",
                                                   label=label, definition=None))
    items[:] = out


def pytest_sessionstart(session):
    _STATE.clear()

"""Per-rank pytest items as cprr cases: ``cprecord --pytest PATH... [-- PYTEST ARGS]`` (the
worker's ``--pytest SPEC``), for suites that run every item in every rank (``torchrun -m
pytest``, DeepSpeed's ``DistributedTest``).

pytest runs in the rank process (in the template, once, when ranks are forked from one) with the
paths and arguments given, and collects as under ``torchrun -m pytest``. Its run loop
(pytest_runtestloop) then hands over to cprr's worker loop instead of running the items in order:
each item is a case named by its node id, run in every rank of the world by pytest's own
protocol (fixtures, markers, skips, xfail). Its world sizes: ``@pytest.mark.world_size(N)`` (or
a list), else the class's ``world_size`` (DeepSpeed's), else cprecord's --nproc-per-node.

Fixtures are the rank's own and end with each case (pytest runs each item as if it were the
last): a module- or session-scoped fixture is set up again for the next case, while what the
test modules keep in their globals stays, as in any reused process. ``tmp_path`` (and
``tmpdir``) is one directory shared by the ranks of the execution, new for each execution.
pytest's output capture is off (``-s``): what an item prints goes where a case's prints go, and a
rank's own messages are never swallowed. pytest's cache is off: the ranks share a folder.

Imports neither torch nor the compiled module.
"""

import json
import pathlib
import re
import unittest

from cprr.api import case as _case

_BAD_NAME = re.compile(r"[\s{]")
# Ranks must not race on .pytest_cache, print a session's summary each, or capture cprr's fds.
_FIXED_ARGS = ["-p", "no:cacheprovider", "-s", "-p", "no:terminal"]


class ItemFailed(AssertionError):
    """A pytest item that failed in its set-up, call or tear-down: pytest's own report."""

    reports_failure = True  # the report shows pytest's, not cprr's frames (cprr.rank.case_body)


def case_name(item):
    """The case name of a pytest item: its node id (what cprecord's labels and the pytest
    plugin's items both use), with no blank or brace."""
    return _BAD_NAME.sub("_", item.nodeid)


def world_sizes_of(item, default):
    """An item's world sizes: its closest world_size marker, its class's world_size, `default`."""
    marker = item.get_closest_marker("world_size")
    if marker is not None and marker.args:
        value = marker.args[0]
    else:
        value = getattr(getattr(item, "cls", None), "world_size", None)
    if value is None:
        return list(default)
    return [int(w) for w in value] if isinstance(value, (list, tuple)) else [int(value)]


def _reason(report):
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


def judge(reports):
    """Raises what the item's reports say: ItemFailed for a failed phase (pytest's report as its
    text), SkipTest for a skip (an xfail too: it is no pass); nothing when it passed."""
    for r in reports:
        if r.failed:
            crash = getattr(r.longrepr, "reprcrash", None)
            first = f"{crash.message} ({crash.path}:{crash.lineno})" if crash else r.when
            raise ItemFailed(f"{r.when} failed: {first}\n{r.longreprtext}")
    for r in reports:
        if r.skipped:
            if hasattr(r, "wasxfail"):
                raise unittest.SkipTest(f"xfail: {r.wasxfail}" if r.wasxfail else "xfail")
            raise unittest.SkipTest(_reason(r))


class Driver:
    """The plugin cprr adds to the rank's pytest: collects, hands over to the worker loop
    (`serve`: given the item cases, returns the exit status), shares tmp_path."""

    def __init__(self, world_sizes, serve):
        self._world_sizes = world_sizes
        self._serve = serve
        self._shared = None  # the running case's tmp_path
        self.problems = []  # collection errors, as texts
        self.status = None

    def pytest_collectreport(self, report):
        if report.failed:
            self.problems.append(f"pytest cannot collect {report.nodeid or 'the session'}:\n"
                                 f"{report.longreprtext}")

    def pytest_runtestloop(self, session):
        self.status = self._serve(self.definitions(session.items), self.problems)
        return True

    def definitions(self, items):
        return [_case.CaseDefinition(
            name=case_name(item), body=self._body(item),
            world_sizes=world_sizes_of(item, self._world_sizes), grid={},
            source=f"{item.location[0]}:{(item.location[1] or 0) + 1}",
            file=str(getattr(item, "path", "") or getattr(item, "fspath", "")))
            for item in items]

    def _body(self, item):
        from _pytest.runner import runtestprotocol

        def body(ctx):
            self._shared = pathlib.Path(ctx.shared_path("tmp_path"))
            try:
                judge(runtestprotocol(item, log=False, nextitem=None))
            finally:
                self._shared = None

        return body

    def tmp_path(self):
        """The running case's tmp_path: one folder for every rank of the execution."""
        self._shared.mkdir(parents=True, exist_ok=True)
        return self._shared


def collect(spec):
    """pytest's collection as within_session does it, and nothing more (cprr.rank.import_probe runs
    it to see what it does)."""
    import pytest

    s = json.loads(spec)
    pytest.main([*_FIXED_ARGS, "--collect-only", *s["args"], "--", *s["paths"]])


def within_session(spec, serve):
    """Runs pytest as the spec (JSON: paths, args, world_sizes) says, in this process; its run
    loop calls ``serve(definitions, problems)``, which returns the exit status this returns."""
    import pytest

    s = json.loads(spec)
    driver = Driver(s["world_sizes"], serve)

    class SharedTmpPath:  # a fixture of a plugin overrides pytest's own of that name
        @pytest.fixture
        def tmp_path(self):
            return driver.tmp_path()

    code = pytest.main([*_FIXED_ARGS, *s["args"], "--", *s["paths"]],
                       plugins=[driver, SharedTmpPath()])
    if driver.status is None:  # pytest stopped before its run loop: a bad argument, say
        return serve([], driver.problems + [
            f"pytest {' '.join(s['args'] + s['paths'])} exited with status {int(code)} before "
            "it collected (pytest's own message is above)"])
    return driver.status

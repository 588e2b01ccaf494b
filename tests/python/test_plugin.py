"""cprr.pytest_plugin end to end: pytest in a subprocess, its cases recorded by the real cprecord
(cpu backend, world size 1, so it takes seconds)."""

import json
import re
import textwrap

import pytest

from conftest import CPRECORD, run_pytest, run_tool, tool_path

CASES = textwrap.dedent('''
    import torch
    import torch.distributed as dist

    import cprr


    @cprr.case(name="demo/passes", world_sizes=[1])
    def passes(ctx):
        x = torch.ones(4)
        dist.all_reduce(x)
        assert torch.all(x == ctx.world_size)
        ctx.output("x", x)


    @cprr.case(name="demo/fails", world_sizes=[1])
    def fails(ctx):
        assert ctx.rank == 99, "the planted failure"


    @cprr.case(name="demo/skips", world_sizes=[1])
    def skips(ctx):
        import unittest
        raise unittest.SkipTest("needs a GPU")


    def test_plain():
        assert 1 + 1 == 2
''')


@pytest.fixture(scope="module")
def cprecord():
    """The build's cprecord, which the plugin runs: the tests fail at once without it."""
    return tool_path("cprecord")


def test_cases_become_items_judged_by_cprecord(tmp_path, cprecord):
    (tmp_path / "test_demo.py").write_text(CASES)
    db = tmp_path / "run.db"
    run = run_pytest(tmp_path, "--cprr-db", str(db), "test_demo.py")
    out = run.stdout
    assert run.returncode == 1, out  # 1: some tests failed
    assert re.search(r"^test_demo\.py::demo/passes@1 PASSED", out, re.M), out
    assert re.search(r"^test_demo\.py::demo/fails@1 FAILED", out, re.M), out
    assert re.search(r"^test_demo\.py::test_plain PASSED", out, re.M), out
    assert re.search(r"^test_demo\.py::demo/skips@1 SKIPPED \(skipped: needs a GPU\)", out, re.M), out
    assert re.search(r"\b1 failed, 2 passed, 1 skipped\b", out), out
    # The failure names the case, what went wrong in its body, and how to replay it.
    failure = out[out.index("= FAILURES ="):]
    assert "demo/fails@1: status fail" in failure, failure
    assert "the planted failure" in failure, failure
    m = re.search(r"replay: cpreplay --db (\S+) --case (\d+)", failure)
    assert m, failure
    assert m.group(1) == str(db)
    assert db.exists()
    assert "demo/passes@1" not in failure


def test_only_the_selected_cases_are_recorded(tmp_path, cprecord):
    (tmp_path / "test_demo.py").write_text(CASES)
    db = tmp_path / "run.db"
    run = run_pytest(tmp_path, "--cprr-db", str(db), "-k", "passes or plain", "test_demo.py")
    assert run.returncode == 0, run.stdout
    assert re.search(r"\b2 passed, 2 deselected\b", run.stdout), run.stdout
    listed = run_tool("--db", db, "--list", "--json", tool="cpreplay", timeout=60)
    if listed.returncode != 0:
        pytest.fail(f"cpreplay --list failed: {listed.stderr}")
    assert "demo/passes@1" in listed.stdout
    assert "demo/fails" not in listed.stdout  # deselected: never recorded


def test_labels_of_agrees_with_cprecords_plan(tmp_path, cprecord):
    """The plugin names its items by labels it computes itself; cprecord's plan must give the
    same labels, or every item would find 'no such case'."""
    (tmp_path / "test_grid.py").write_text(textwrap.dedent('''
        import cprr

        @cprr.case(name="demo/grid", world_sizes=[1, 2], grid={"zeta": [1, 20], "alpha": ["x"]})
        def grid(ctx):
            pass

        @cprr.case(world_sizes=[2])
        def default_named(ctx):
            pass
    '''))
    listed = run_tool("--python", tmp_path / "test_grid.py", "--backend", "cpu", "--list", "--json",
                      env={"CPRR_CPRECORD": CPRECORD}, timeout=120)
    assert listed.returncode == 0, listed.stderr
    planned = sorted(c["label"] for c in json.loads(listed.stdout)["plan"])

    code = compile((tmp_path / "test_grid.py").read_text(), str(tmp_path / "test_grid.py"),
                   "exec")
    namespace = {"__name__": "test_grid"}
    exec(code, namespace)
    from cprr import pytest_plugin

    ours = sorted(label for fn in ("grid", "default_named")
                  for label in pytest_plugin.labels_of(namespace[fn].__cprr_case__))
    assert ours == planned
    assert "demo/grid{alpha=x,zeta=20}@2" in ours
    assert "test_grid/default_named@2" in ours


class _NoOptions:
    """A pytest config whose --cprr-* options were not given."""

    def getoption(self, name):
        return None


def _plugin_at(monkeypatch, tmp_path):
    """The plugin as if imported from a package at tmp_path/python/cprr, with nothing of cprr
    in the environment or on PATH."""
    from cprr import pytest_plugin
    monkeypatch.setattr(pytest_plugin, "__file__",
                        str(tmp_path / "python" / "cprr" / "pytest_plugin.py"))
    monkeypatch.delenv("CPRR_CPRECORD", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return pytest_plugin


def _executable(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_the_plugin_runs_the_cprecord_of_its_build_tree_or_prefix(monkeypatch, tmp_path):
    plugin = _plugin_at(monkeypatch, tmp_path)
    installed = _executable(tmp_path / "bin" / "cprecord")  # PREFIX/lib/.. is tmp_path here
    assert plugin._cprecord(_NoOptions()) == installed
    built = _executable(tmp_path / "tools" / "cprecord")  # build/python/cprr -> build/tools
    assert plugin._cprecord(_NoOptions()) == built, "the build tree's, before a prefix's"
    monkeypatch.setenv("CPRR_CPRECORD", "/given/cprecord")
    assert plugin._cprecord(_NoOptions()) == "/given/cprecord", "CPRR_CPRECORD wins"


def test_without_a_cprecord_the_error_names_where_it_looked(monkeypatch, tmp_path):
    plugin = _plugin_at(monkeypatch, tmp_path)
    with pytest.raises(pytest.UsageError) as e:
        plugin._cprecord(_NoOptions())
    assert str(tmp_path / "tools" / "cprecord") in str(e.value)
    assert str(tmp_path / "bin" / "cprecord") in str(e.value)
    assert "--cprr-cprecord" in str(e.value)

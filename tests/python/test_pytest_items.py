"""Per-rank pytest items as cprr cases (cprr.suites.pytest_items, ``cprecord --pytest``).

End to end on corpus/suites/per_rank (DeepSpeed-style classes with a world_size, a world_size
marker, parametrized items, a shared tmp_path, a skip, and a ZeRO config cached at module level
that one test edits: a state leak that cpreplay names with its polluter), through cprecord on cpu
in both modes, and through the pytest plugin (--cprr-nproc-per-node); a bad pytest argument and
a missing path are said plainly; a rank whose pytest collected other items is named. In-process:
world sizes of an item, and what its reports mean.
"""

import json
import os
import types
import unittest

import pytest

from cprr.suites import pytest_items as _pytest_items
from conftest import run_pytest, run_tool

HERE = os.path.dirname(os.path.abspath(__file__))
PER_RANK = os.path.join(os.path.dirname(os.path.dirname(HERE)), "corpus", "suites", "per_rank")
PREFIX = "corpus/suites/per_rank/test_items.py::"
VICTIM = PREFIX + "TestZeroBuckets::test_b_default_buckets@2"
POLLUTER = PREFIX + "TestZeroBuckets::test_a_small_buckets@2"


def cprecord(*args, cwd=None):
    return run_tool("--backend", "cpu", *args, cwd=cwd)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    db = tmp_path_factory.mktemp("items") / "items.db"
    run = cprecord("--pytest", PER_RANK, "--nproc-per-node", "2", "--mode", "both", "--db", db,
                   "--json")
    return db, {c["label"]: c for c in json.loads(run.stdout)["cases"]}, run


def test_every_item_is_a_case_at_its_world_size(recorded):
    _, cases, run = recorded
    assert sorted(cases) == sorted(PREFIX + label for label in [
        "TestZeroBuckets::test_a_small_buckets@2", "TestZeroBuckets::test_b_default_buckets@2",
        "TestZeroBuckets::test_c_small_buckets_fixed@2",
        "TestZeroBuckets::test_d_default_buckets_fixed@2",
        "TestCheckpoint::test_save_then_load[1]@2", "TestCheckpoint::test_save_then_load[2]@2",
        "TestCheckpoint::test_four_ranks@4",  # its marker over its class's world_size
        "TestCheckpoint::test_eight_gpus@2",
        "test_rank_environment@2"]), run.stderr[-3000:]
    assert run.returncode == 1


def test_the_leak_diverges_and_replays_as_a_state_leak(recorded):
    db, cases, _ = recorded
    statuses = {e["mode"]: e["status"] for e in cases[VICTIM]["executions"]}
    assert statuses == {"fresh": "pass", "pool": "fail"} and cases[VICTIM]["fresh_vs_pool"]
    pooled = next(e for e in cases[VICTIM]["executions"] if e["mode"] == "pool")
    assert "bucket 3: the cache was edited" in pooled["summary"], pooled
    replay = run_tool("--db", db, "--case", cases[VICTIM]["id"], tool="cpreplay")
    assert replay.stdout.splitlines()[0].endswith(f"{VICTIM} (run 1): state_leak"), replay.stdout
    assert f"case {cases[POLLUTER]['id']} {POLLUTER}" in replay.stdout, replay.stdout


def test_the_rest_pass_share_tmp_path_and_skip(recorded):
    _, cases, _ = recorded
    for label, case in cases.items():
        if label == VICTIM:
            continue
        if label.endswith("test_eight_gpus@2"):
            assert case["status"] == "skip" and case["as_expected"], case
            assert all(e["summary"].endswith("needs 8 GPUs") for e in case["executions"]), case
        else:  # save_then_load reads on every rank what rank 0 wrote to tmp_path
            assert case["status"] == "pass" and not case["fresh_vs_pool"], case


def test_bad_input_is_said(tmp_path):
    run = cprecord("--pytest", tmp_path / "missing.py", "--db", tmp_path / "a.db")
    assert run.returncode == 2 and "--pytest" in run.stderr and "no such file" in run.stderr
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    run = cprecord("--pytest", tmp_path, "--db", tmp_path / "a.db", "--", "--no-such-flag")
    assert run.returncode == 2, run.stderr
    assert "--no-such-flag" in run.stderr and "before it collected" in run.stderr, run.stderr


def test_a_rank_that_collected_other_items_is_named(tmp_path):
    (tmp_path / "test_by_rank.py").write_text(
        "import os, pytest\n"
        "@pytest.mark.parametrize('r', [os.environ.get('CPRR_RANK', '0')])\n"
        "def test_r(r):\n    pass\n")
    run = run_tool("--backend", "cpu", "--pytest", tmp_path, "--nproc-per-node", "2", "--db",
                   tmp_path / "b.db", "--json", "--timeout", "20", cwd=tmp_path,
                   env={"CPRR_PYTHON_TEMPLATE": "off"})
    (case,) = json.loads(run.stdout)["cases"]
    assert case["status"] == "error", case
    assert "rank 1: this worker has no case named 'test_by_rank.py::test_r[0]'" in \
        case["executions"][0]["summary"], case


# ---- in-process -------------------------------------------------------------------------------


class _Marker:
    def __init__(self, *args):
        self.args = args


def _item(marker=None, cls=None):
    return types.SimpleNamespace(get_closest_marker=lambda name: marker, cls=cls)


def test_world_sizes_marker_then_class_then_default():
    class Ds:
        world_size = [1, 4]

    assert _pytest_items.world_sizes_of(_item(_Marker(3), Ds), [2]) == [3]
    assert _pytest_items.world_sizes_of(_item(None, Ds), [2]) == [1, 4]
    assert _pytest_items.world_sizes_of(_item(None, None), [2, 8]) == [2, 8]


def _report(outcome, when="call", longrepr=None, **extra):
    r = types.SimpleNamespace(failed=outcome == "failed", skipped=outcome == "skipped",
                              when=when, longrepr=longrepr, longreprtext=str(longrepr), **extra)
    return r


def test_reports_judged_as_pytest_reports_them():
    _pytest_items.judge([_report("passed", "setup"), _report("passed")])
    crash = types.SimpleNamespace(reprcrash=types.SimpleNamespace(
        message="AssertionError: x", path="t.py", lineno=3))
    with pytest.raises(_pytest_items.ItemFailed, match=r"teardown failed: AssertionError: x "
                                                       r"\(t.py:3\)"):
        _pytest_items.judge([_report("passed"), _report("failed", "teardown", crash)])
    with pytest.raises(unittest.SkipTest, match="^needs 8 GPUs$"):
        _pytest_items.judge([_report("skipped", "setup", ("t.py", 1, "Skipped: needs 8 GPUs"))])
    with pytest.raises(unittest.SkipTest, match="^xfail: known bug$"):
        _pytest_items.judge([_report("skipped", wasxfail="known bug")])


def test_pytest_plugin_runs_plain_items_in_every_rank(tmp_path):
    """Run from another folder with -k: the plugin's items are the ranks' (same node ids, the
    suite's own forking harness never runs), the leak fails pooled, the skip skips."""
    run = run_pytest(tmp_path, "--cprr-nproc-per-node", "2", "-rs", "-k", "not save_then_load",
                     PER_RANK)
    out = run.stdout
    assert "test_items.py::TestZeroBuckets::test_b_default_buckets@2 FAILED" in out, out
    assert "bucket 3: the cache was edited" in out, out
    assert "test_items.py::TestCheckpoint::test_four_ranks@4 PASSED" in out, out
    assert "test_items.py::test_rank_environment@2 PASSED" in out, out
    assert "needs 8 GPUs" in out, out
    assert "1 failed, 5 passed, 1 skipped, 2 deselected" in out, out


def test_a_pytest_path_with_no_items_is_said_as_given(tmp_path):
    (tmp_path / "test_nothing.py").write_text("X = 1\n")
    run = cprecord("--pytest", tmp_path, "--db", tmp_path / "c.db")
    assert run.returncode == 2, run.stderr
    assert f"--pytest {tmp_path}: no case in these files" in run.stderr, run.stderr

"""A rank that returns from the case while a peer waits in a call it never entered (a
lone return): the execution is decided when the peer is seen waiting, not at the deadline, and
the note names the rank that returned, the call and its line. Over a `@cprr.case`, a torchrun
script, a MultiProcessTestCase test and a per-rank pytest item, both modes; a rank that returns
after its peers' last call is no lone return, nor one whose peer stays in a call that raised on
both."""

import json
import os
import re
import textwrap

import pytest

from conftest import record_python, run_tool

STAND_INS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stand_ins")

DEADLINE_S = 60  # long: what decided a case is its note's to say, never the clock's

CASES = textwrap.dedent('''
    import datetime
    import time

    import torch
    import torch.distributed as dist

    import cprr


    @cprr.case(name="lone/returns_before_the_second", world_sizes=[2, 3])
    def returns_before_the_second(ctx):
        t = torch.ones(4)
        dist.all_reduce(t)
        if ctx.rank == 1:
            return
        dist.all_reduce(t)  # the second


    @cprr.case(name="lone/expects_a_timeout", world_sizes=[2])
    def expects_a_timeout(ctx):
        # Rank 0 alone calls a barrier on a group with a short timeout and expects it to time
        # out, as a test of timeouts does; rank 1 meets it in the world's all-reduce after, and
        # returns first. A raised call is no collective of a case that passes (no mismatch), and
        # one the rank entered before its last is no lone return.
        group = dist.new_group(timeout=datetime.timedelta(seconds=1))
        if ctx.rank == 0:
            try:
                dist.barrier(group)
            except RuntimeError:
                pass
            else:
                raise AssertionError("the barrier did not time out")
        t = torch.ones(4)
        dist.all_reduce(t)


    def raise_twice():
        # Every rank's all-reduce raises at once (an op complex tensors do not support), as a
        # test of an error path does.
        for _ in range(2):
            try:
                dist.all_reduce(torch.ones(2, dtype=torch.cfloat), dist.ReduceOp.MAX)
            except RuntimeError:
                pass
            else:
                raise AssertionError("the all-reduce did not raise")


    @cprr.case(name="lone/every_rank_raises_alike", world_sizes=[2])
    def every_rank_raises_alike(ctx):
        # The ranks return in either order, each after a last call that raised on both
        # (raises_alike_and_stays holds rank 1 in the case after it).
        raise_twice()


    # Rank 1 held in the case after its last call: rank 0 returns while rank 1's last call is the
    # one that raised on both, whatever the order of their reports. Run alone (--filter).
    @cprr.case(name="lone/raises_alike_and_stays", world_sizes=[2], expect="hang")
    def raises_alike_and_stays(ctx):
        raise_twice()
        if ctx.rank == 1:
            time.sleep(3600)  # why: the hang the case's deadline ends, long after rank 0 returned


    @cprr.case(name="lone/returns_after_the_last", world_sizes=[2])
    def returns_after_the_last(ctx):
        t = torch.ones(4)
        dist.all_reduce(t)
        if ctx.rank == 0:
            t.add_(1)  # host work after the last call is no call left behind
''')

SCRIPT = textwrap.dedent('''
    import sys

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    t = torch.ones(4)
    dist.all_reduce(t)
    if dist.get_rank() == 1:
        sys.exit(0)  # done early: the script ends for this rank
    dist.all_reduce(t)  # the second
''')


TESTCASE = textwrap.dedent('''
    import torch
    import torch.distributed as dist
    from torch.testing._internal.common_distributed import MultiProcessTestCase


    class LoneTest(MultiProcessTestCase):
        def setUp(self):
            super().setUp()
            self._spawn_processes()

        @property
        def world_size(self):
            return 2

        def test_returns_early(self):
            dist.init_process_group("gloo", init_method=f"file://{self.file_name}",
                                    rank=self.rank, world_size=self.world_size)
            t = torch.ones(4)
            dist.all_reduce(t)
            if self.rank == 1:
                return
            dist.all_reduce(t)  # the second
''')

PER_RANK = textwrap.dedent('''
    import pytest
    import torch
    import torch.distributed as dist


    @pytest.mark.world_size(2)
    def test_returns_early():
        t = torch.ones(4)
        dist.all_reduce(t)
        if dist.get_rank() == 1:
            return
        dist.all_reduce(t)  # the second
''')


def _line_of(text, needle):
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def _check_released(e, where):
    assert e["status"] == "hang", e
    # Decided at the return, not at the deadline: the note is the live check's, which says so.
    # At W=3, rank 0 or rank 2: whichever the check reads first.
    assert re.search(r"after rank 1 returned from the case, not at the deadline: rank [02] had "
                     r"entered collective #1 \(all_reduce\) at " + re.escape(where) +
                     ", which rank 1 never did", e["note"]), e
    assert "rank 1: finished the case" in e["summary"], e
    outcomes = {r["rank"]: r["outcome"] for r in e["ranks"]}
    assert outcomes[1] == "ok", e


def test_a_case_whose_rank_returns_early_is_decided_at_once(tmp_path):
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "test_lone.py").write_text(CASES)
    run = record_python(folder, "--db", tmp_path / "lone.db", "--json", "--mode", "both",
                        "--exclude", "stays", "--timeout", DEADLINE_S, timeout=DEADLINE_S * 4)
    cases = {c["label"]: c for c in json.loads(run.stdout)["cases"]}
    line = _line_of(CASES, "# the second")
    for w in (2, 3):
        case = cases[f"lone/returns_before_the_second@{w}"]
        assert len(case["executions"]) == 2, case
        for e in case["executions"]:
            _check_released(e, f"test_lone.py:{line}")
    for label in ("lone/returns_after_the_last@2", "lone/expects_a_timeout@2",
                  "lone/every_rank_raises_alike@2"):
        assert cases[label]["verdict"] is None, cases[label]
        for e in cases[label]["executions"]:
            assert e["status"] == "pass" and "returned" not in e.get("note", ""), e


def test_a_peer_left_in_a_call_that_raised_on_every_rank_is_no_lone_return(tmp_path):
    """Rank 1 stays in the case after a last call that raised on both ranks: the live check
    sees rank 0 returned and rank 1 in that call (by construction, not by a race), and does not
    release it; the deadline ends the case."""
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "test_lone.py").write_text(CASES)
    run = record_python(folder, "--db", tmp_path / "stays.db", "--json", "--mode", "fresh",
                        "--filter", "stays", "--timeout", DEADLINE_S, timeout=DEADLINE_S * 4)
    (case,) = json.loads(run.stdout)["cases"]
    assert case["label"] == "lone/raises_alike_and_stays@2", case
    (e,) = case["executions"]
    assert e["status"] == "hang" and case["as_expected"], case
    outcomes = {r["rank"]: r["outcome"] for r in e["ranks"]}
    assert outcomes == {0: "ok", 1: "no_result"}, e  # rank 0 returned; rank 1 never did
    # The note is the raised call's, not the lone return's: no release at rank 0's return.
    assert e["note"].startswith("rank 0: dist.all_reduce raised RuntimeError: "), e
    assert "returned from the case" not in e["note"], e


def test_a_torchrun_script_whose_rank_exits_early_is_decided_at_once(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    run = run_tool("--backend", "cpu", "--torchrun", script, "--nproc-per-node", "2", "--db",
                   tmp_path / "t.db", "--json", "--mode", "both", "--timeout", DEADLINE_S,
                   timeout=DEADLINE_S * 4)
    (case,) = json.loads(run.stdout)["cases"]
    assert len(case["executions"]) == 2, case
    for e in case["executions"]:
        _check_released(e, f"train.py:{_line_of(SCRIPT, '# the second')}")


def test_a_testcase_family_test_whose_rank_returns_early_is_decided_at_once(tmp_path):
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "test_lone_tc.py").write_text(TESTCASE)
    run = record_python(folder, "--db", tmp_path / "tc.db", "--json", "--mode", "both",
                        "--timeout", DEADLINE_S, pythonpath=[STAND_INS], timeout=DEADLINE_S * 4)
    (case,) = json.loads(run.stdout)["cases"]
    assert case["label"] == "LoneTest.test_returns_early@2", case
    assert len(case["executions"]) == 2, case
    for e in case["executions"]:
        _check_released(e, f"test_lone_tc.py:{_line_of(TESTCASE, '# the second')}")


def test_a_per_rank_pytest_item_whose_rank_returns_early_is_decided_at_once(tmp_path):
    (tmp_path / "test_lone_items.py").write_text(PER_RANK)
    run = run_tool("--backend", "cpu", "--pytest", tmp_path, "--mode", "both", "--db",
                   tmp_path / "p.db", "--json", "--timeout", DEADLINE_S, cwd=tmp_path,
                   timeout=DEADLINE_S * 4)
    (case,) = json.loads(run.stdout)["cases"]
    assert len(case["executions"]) == 2, case
    for e in case["executions"]:
        _check_released(e, f"test_lone_items.py:{_line_of(PER_RANK, '# the second')}")

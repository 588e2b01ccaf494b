"""A rank that returns from the case while a peer waits in a call it never entered (issue 57, a
lone return): the execution is decided when the peer is seen waiting, not at the deadline, and
the note names the rank that returned, the call and its line. Over a `@cprr.case` and a torchrun
script, both modes; a rank that returns after its peers' last call is no lone return."""

import json
import re
import textwrap

import pytest

from test_plugin import record_python

DEADLINE_S = 20

CASES = textwrap.dedent('''
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


def _line_of(text, needle):
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def _check_released(e, where):
    assert e["status"] == "hang", e
    assert e["wall_ms"] < DEADLINE_S * 1000 / 2, e  # decided at the return, not the deadline
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
                        "--timeout", DEADLINE_S, timeout=DEADLINE_S * 4)
    cases = {c["label"]: c for c in json.loads(run.stdout)["cases"]}
    line = _line_of(CASES, "# the second")
    for w in (2, 3):
        case = cases[f"lone/returns_before_the_second@{w}"]
        assert len(case["executions"]) == 2, case
        for e in case["executions"]:
            _check_released(e, f"test_lone.py:{line}")
    for e in cases["lone/returns_after_the_last@2"]["executions"]:
        assert e["status"] == "pass" and "returned" not in e.get("note", ""), e


def test_a_torchrun_script_whose_rank_exits_early_is_decided_at_once(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    run = record_python(None, "--backend", "cpu", "--torchrun", script, "--nproc-per-node", "2",
                        "--db", tmp_path / "t.db", "--json", "--mode", "both", "--timeout",
                        DEADLINE_S, tool="cprecord", timeout=DEADLINE_S * 4)
    (case,) = json.loads(run.stdout)["cases"]
    assert len(case["executions"]) == 2, case
    for e in case["executions"]:
        _check_released(e, f"train.py:{_line_of(SCRIPT, '# the second')}")

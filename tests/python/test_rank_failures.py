"""A rank whose case raises while the others go on (cprr.rank.case_body turns the exception into
the report): the execution is that rank's fail with the
exception's last line where a report has one line (the console table, --json's summary, JUnit's
message, cpreplay, the pytest item) and its whole traceback where there is room (the console
below the table, the store, --json's ranks, cpreplay, the pytest item); never a hang, and never
after the deadline: the ranks left waiting are released and their world replaced."""

import json
import os
import re
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from conftest import PACKAGE_ROOT, record_python, run_pytest, run_tool

CASES = textwrap.dedent('''
    import sys

    import torch
    import torch.distributed as dist

    import cprr


    @cprr.case(name="raises/before_all_reduce", world_sizes=[2, 3])
    def before_all_reduce(ctx):
        t = torch.ones(4)
        dist.all_reduce(t)
        if ctx.rank == 1:
            raise ValueError(f"rank {ctx.rank} saw a bad shape")
        dist.all_reduce(t)


    @cprr.case(name="raises/exit_zero", world_sizes=[2])
    def exit_zero(ctx):
        if ctx.rank == 1:
            sys.exit(0)
        dist.barrier()


    @cprr.case(name="raises/memory_error", world_sizes=[2])
    def memory_error(ctx):
        if ctx.rank == 0:
            raise MemoryError("no room for the activations")
        dist.all_reduce(torch.ones(2))


    @cprr.case(name="raises/pipeline_loss", world_sizes=[2])
    def pipeline_loss(ctx):
        # Two pipeline stages: the first sends its activations, the last computes the loss and
        # indexes past its labels before the loss all-reduce.
        acts = torch.arange(8.0) if ctx.rank == 0 else torch.empty(8)
        if ctx.rank == 0:
            dist.send(acts, 1)
        else:
            dist.recv(acts, 0)
        loss = torch.zeros(())
        if ctx.rank == ctx.world_size - 1:
            loss = acts[torch.tensor([9])].sum()
        dist.all_reduce(loss)


    @cprr.case(name="raises/after_the_last_collective", world_sizes=[2])
    def after_last(ctx):
        t = torch.ones(4)
        dist.all_reduce(t)
        if ctx.rank == 1:
            raise RuntimeError("checked after the all-reduce")


    @cprr.case(name="raises/async_left_pending", world_sizes=[2])
    def async_left_pending(ctx):
        t = torch.ones(4)
        dist.all_reduce(t)
        if ctx.rank == 1:
            raise ValueError("rank 1 gave up")
        dist.all_reduce(t, async_op=True)  # never waited for: pending when the case ends


    @cprr.case(name="healthy/after_them", world_sizes=[2, 3])
    def healthy(ctx):
        t = torch.ones(4)
        dist.all_reduce(t)
        ctx.output("t", t)
''')


def _line_of(fragment):
    """The line of CASES (as written to test_raises.py) holding `fragment`."""
    return next(n for n, text in enumerate(CASES.splitlines(), 1) if fragment in text)


# (label, failing rank, exception line, the line of the file that raised, the collective the
# others waited in, or None when they finished)
EXPECTED = [
    ("raises/before_all_reduce@2", 1, "ValueError: rank 1 saw a bad shape",
     _line_of("raise ValueError"), "#1 (all_reduce)"),
    ("raises/before_all_reduce@3", 1, "ValueError: rank 1 saw a bad shape",
     _line_of("raise ValueError"), "#1 (all_reduce)"),
    ("raises/exit_zero@2", 1, "SystemExit: 0", _line_of("sys.exit(0)"), "#0 (barrier)"),
    ("raises/memory_error@2", 0, "MemoryError: no room for the activations",
     _line_of("raise MemoryError"), "#0 (all_reduce)"),
    ("raises/pipeline_loss@2", 1,
     "IndexError: index 9 is out of bounds for dimension 0 with size 8",
     _line_of("acts[torch.tensor([9])]"), "#0 (all_reduce)"),
    ("raises/after_the_last_collective@2", 1, "RuntimeError: checked after the all-reduce",
     _line_of("raise RuntimeError"), None),
]
DEADLINE_S = 60


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("raises")
    (folder / "test_raises.py").write_text(CASES)
    db, junit = folder / "run.db", folder / "junit.xml"
    run = record_python(folder, "--db", db, "--json", "--junit", junit, "--timeout", DEADLINE_S,
                        "--mode", "both",
                        # A guard only: a case the deadline ended is a hang, which the checks of
                        # its status and note name.
                        timeout=DEADLINE_S * 10)
    return folder, db, junit, run, json.loads(run.stdout)


def _case(report, label):
    return next(c for c in report["cases"] if c["label"] == label)


@pytest.mark.parametrize("label,rank,line,lineno,waited", EXPECTED)
def test_the_raising_rank_fails_the_execution_with_its_exception(recorded, label, rank, line,
                                                                   lineno, waited):
    folder, _, _, run, report = recorded
    case = _case(report, label)
    assert len(case["executions"]) == 2, case  # fresh and pooled
    for e in case["executions"]:
        assert e["status"] == "fail", e
        assert e["summary"] == f"rank {rank}: {line} (test_raises.py:{lineno})", e
        errors = {r["rank"]: r.get("error", "") for r in e["ranks"]}
        assert errors[rank].startswith("Traceback (most recent call last):\n"), errors
        assert f'test_raises.py", line {lineno}, in ' in errors[rank], errors
        assert errors[rank].rstrip().endswith(line), errors
        assert "cprr/rank/case_body.py" not in errors[rank], "cprr's own frame in the user's traceback"
        if waited:
            # Decided at the failure: the live check's note says so (the deadline's would not).
            assert "after rank %d failed, not at the deadline" % rank in e["note"], e
            assert f"entered collective {waited}, which rank {rank} never did" in e["note"], e
            assert "ended with its world, which is replaced" in e["note"], e
        else:
            # Decided when the last rank reported: every other rank returned by itself, so
            # neither the deadline nor the grace after the failure ended the case.
            assert e["note"] == "" or "ended with its world" not in e["note"], e
            assert "still running" not in e["note"], e
            assert all(r["outcome"] == "ok" for r in e["ranks"] if r["rank"] != rank), e


def test_the_pooled_world_is_replaced_only_when_ranks_were_released(recorded):
    report = recorded[4]
    pooled = {c["label"]: next(e for e in c["executions"] if e["mode"] == "pool")
              for c in report["cases"]}
    released = pooled["raises/pipeline_loss@2"]
    kept = pooled["raises/after_the_last_collective@2"]
    # The run order is the plan's: each case's world is the next one's unless it was ended.
    healthy = pooled["healthy/after_them@2"]
    assert healthy["status"] == "pass", healthy
    assert released["world"] != kept["world"], (released, kept)


def test_a_collective_a_finished_rank_left_pending_replaces_the_world(recorded):
    """Rank 0 ends its body with an async all-reduce rank 1 never joins: the world's next
    collective would queue behind it, so the world is replaced (whether rank 0 was still in the
    case when the check saw it, or had finished), and the next case passes."""
    report = recorded[4]
    case = _case(report, "raises/async_left_pending@2")
    for e in case["executions"]:
        assert e["status"] == "fail", e
        released = ("rank 0 had entered collective #1 (all_reduce), which rank 1 never did"
                    in e["note"])
        finished = ("rank 0 called collective #1 (all_reduce), which rank 1 never entered before "
                    "it failed, so it can never complete: the world is replaced" in e["note"])
        assert released or finished, e
    pooled = next(e for e in case["executions"] if e["mode"] == "pool")
    after = next(e for e in _case(report, "healthy/after_them@2")["executions"]
                 if e["mode"] == "pool")
    assert after["status"] == "pass", after
    assert after["world"] != pooled["world"], (pooled, after)


def test_the_console_shows_the_exception_line_and_the_traceback(recorded):
    folder, db, _, _, _ = recorded
    replay = run_tool("--db", db, "--case", "1", tool="cpreplay", env={"PYTHONPATH": PACKAGE_ROOT},
                      stderr_into_stdout=True, timeout=DEADLINE_S)
    out = replay.stdout
    assert ("fresh replay: fail (rank 1: ValueError: rank 1 saw a bad shape (test_raises.py:%d))"
            % _line_of("raise ValueError")) in out, out
    assert "rank 1 in the fresh replay:\nTraceback (most recent call last):" in out, out
    assert 'raise ValueError(f"rank {ctx.rank} saw a bad shape")' in out, out


def test_junit_messages_carry_the_exception_line(recorded):
    junit = recorded[2]
    messages = [f.get("message") for f in ET.parse(junit).iter("failure")]
    line = _line_of("acts[torch.tensor([9])]")
    assert any(m.endswith("rank 1: IndexError: index 9 is out of bounds for dimension 0 with "
                          f"size 8 (test_raises.py:{line})") for m in messages), messages


def test_the_pytest_item_shows_the_exception_line_and_the_traceback(tmp_path):
    (tmp_path / "test_raises.py").write_text(CASES)
    run = run_pytest(tmp_path, "test_raises.py", "-k", "before_all_reduce and 2")
    out = run.stdout
    assert run.returncode == 1, out
    failure = out[out.index("= FAILURES ="):]
    assert ("execution 1: rank 1: ValueError: rank 1 saw a bad shape (test_raises.py:%d)"
            % _line_of("raise ValueError")) in failure, failure
    assert re.search(r"^  rank 1:\n    Traceback \(most recent call last\):", failure, re.M), \
        failure
    # The database is in pytest's own temporary directory, which pytest prunes.
    db = re.search(r"replay: cpreplay --db (\S+) --case", failure).group(1)
    assert "pytest-of-" in db, db


def test_without_pytests_tmpdir_the_default_database_is_removed_at_the_end(tmp_path):
    (tmp_path / "test_raises.py").write_text(CASES)
    run = run_pytest(tmp_path, "-p", "no:tmpdir", "test_raises.py", "-k", "before_all_reduce and 2")
    out = run.stdout
    assert run.returncode == 1, out
    said = re.search(r"replay: the database \((\S+)\) is removed when the session ends: pass "
                     r"--cprr-db PATH to keep it", out)
    assert said, out
    assert not os.path.exists(os.path.dirname(said.group(1))), said.group(1)

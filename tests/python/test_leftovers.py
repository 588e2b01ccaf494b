"""A Python case that forks a process and leaves it running: cprecord kills it after the case,
names it in the execution's note, and leaves no descendant when it exits."""

import json
import textwrap
import time

from conftest import run_tool

CASES = textwrap.dedent('''
    import os
    import time

    import torch
    import torch.distributed as dist

    import cprr

    PID_FILE = {pid_file!r}


    @cprr.case(name="leaves/a_sleeping_child", world_sizes=[2])
    def sleeping_child(ctx):
        t = torch.ones(4)
        dist.all_reduce(t)
        if ctx.rank == 1:
            pid = os.fork()
            if pid == 0:
                time.sleep(600)  # why: the child left running, which cprecord must kill
                os._exit(0)
            with open(PID_FILE, "w") as f:
                f.write(str(pid))
        ctx.output("t", t)
''')


def _runs(pid):
    """Whether `pid` still runs (a zombie does not) after a minute for a SIGKILL to land: False
    as soon as it is gone."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False
        time.sleep(0.02)  # why: the poll interval of a wait, a minute at most, for it to end
    return True


def test_a_forked_child_is_killed_after_the_case_and_named(tmp_path):
    pid_file = tmp_path / "child.pid"
    (tmp_path / "test_leaves.py").write_text(CASES.format(pid_file=str(pid_file)))
    run = run_tool("--python", tmp_path / "test_leaves.py", "--backend", "cpu", "--db",
                   tmp_path / "run.db", "--json", timeout=120)
    assert run.returncode == 0, run.stderr
    child = int(pid_file.read_text())
    execution = json.loads(run.stdout)["cases"][0]["executions"][0]
    assert execution["status"] == "pass", execution
    assert (f"rank 1 left 1 process running after case 1 (leaves/a_sleeping_child@2): "
            f"pid {child} (") in execution["note"], execution
    assert not _runs(child), f"pid {child} outlived cprecord"

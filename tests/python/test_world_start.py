"""A Python world makes torch's default process group once it is connected, before its first
case (cprr.worker, whose cprr.rank.worker_loop makes it in _world_connected
through _cprr.on_connected): a fresh world says so in
its start-up phases, standby worlds too (made while earlier cases ran), and a connected hook that
raises fails the world's start with its error rather than the case."""

import json
import textwrap

from conftest import record_python

CASES = textwrap.dedent('''
    import torch
    import torch.distributed as dist

    import cprr


    @cprr.case(name="start/sum", world_sizes=[2])
    def total(ctx):
        t = torch.full((4,), float(ctx.rank + 1))
        dist.all_reduce(t)
        ctx.output("sum", t)
''')


def _phases(report):
    return [[p["phase"] for p in e["startup_phases"]]
            for c in report["cases"] for e in c["executions"] if e["mode"] == "fresh"]


def test_each_fresh_world_makes_torchs_group_before_its_case(tmp_path):
    (tmp_path / "test_start.py").write_text(CASES)
    for standby in ("0", "2"):
        done = record_python(tmp_path, "--mode", "fresh", "--repeat", "3", "--standby", standby,
                             "--json", "--db", tmp_path / f"s{standby}.db")
        assert done.returncode == 0, done.stderr
        phases = _phases(json.loads(done.stdout))
        assert len(phases) == 3
        for world in phases:
            assert "torch process group" in world, world
            # after the world joined its communicator, before the case's own messages
            assert world.index("torch process group") > world.index("gloo communicator")


def test_a_connected_hook_that_raises_fails_the_worlds_start(tmp_path):
    (tmp_path / "test_start.py").write_text(CASES + textwrap.dedent('''
        from cprr import _cprr


        def _broken(transport, device_index):
            raise RuntimeError("no process group today")


        _cprr.on_connected(_broken)
    '''))
    done = record_python(tmp_path, "--mode", "fresh", "--json", "--db", tmp_path / "b.db")
    assert done.returncode != 0
    assert "no process group today" in done.stdout + done.stderr

"""Process groups a case makes and leaves are ended with it: in a pooled world the next case
finds only the groups the rank had before, as in a fresh world, so fresh and pooled agree; a
group the case destroyed itself is left alone, and a group this rank is no member of costs
nothing."""

import json
import os
import subprocess
import textwrap

import pytest

from test_plugin import CPRECORD, PACKAGE_ROOT

CASES = textwrap.dedent('''
    import torch
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    import cprr


    def _groups_known():
        world = getattr(c10d, "_world", None)  # torch >= 2.0 keeps its maps there
        return len(world.pg_map if world is not None else c10d._pg_map)


    @cprr.case(name="groups/a_count_before", world_sizes=[2])
    def count_before(ctx):
        ctx.output("groups", torch.tensor([_groups_known()], dtype=torch.int64))


    @cprr.case(name="groups/b_make_and_leave", world_sizes=[2])
    def make_and_leave(ctx):
        pair = dist.new_group([0, 1])
        t = torch.ones(4)
        dist.all_reduce(t, group=pair)
        singles = [dist.new_group([r]) for r in range(ctx.world_size)]  # as new_subgroups does
        gone = dist.new_group([0, 1])
        dist.destroy_process_group(gone)  # one the case ends itself
        ctx.output("t", t)


    @cprr.case(name="groups/c_count_after", world_sizes=[2])
    def count_after(ctx):
        ctx.output("groups", torch.tensor([_groups_known()], dtype=torch.int64))
''')


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if not os.access(CPRECORD, os.X_OK):
        pytest.fail(f"no cprecord at {CPRECORD}: set CPRR_CPRECORD")
    folder = tmp_path_factory.mktemp("groups")
    (folder / "test_groups.py").write_text(CASES)
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([CPRECORD, "--python", str(folder), "--backend", "cpu", "--mode", "both",
                          "--db", str(folder / "run.db"), "--json", "--timeout", "60"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=300)
    return json.loads(run.stdout)


def test_the_groups_a_case_left_are_ended_so_fresh_and_pooled_agree(report):
    for case in report["cases"]:
        assert case["as_expected"], case
        assert [e["status"] for e in case["executions"]] == ["pass", "pass"], case
        assert not case.get("fresh_vs_pool"), case
        assert not case.get("verdict"), case

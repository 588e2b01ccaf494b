"""A process group a case makes and leaves (tensor-parallel code building its groups per test):
cprr ends it with the case, so the next case in a pooled rank sees the groups a fresh rank
would. The three cases run in this order; the last one's output differs between fresh and
pooled if a group leaked.

Run with ``cprecord --python corpus/python --mode both``: no verdict, no divergence.
"""

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

import cprr


def _groups_known():
    world = getattr(c10d, "_world", None)  # torch >= 2.0 keeps its maps there
    return len(world.pg_map if world is not None else c10d._pg_map)


@cprr.case(name="healthy/py_groups_counted_before", world_sizes=[2])
def counted_before(ctx):
    ctx.output("groups", torch.tensor([_groups_known()], dtype=torch.int64))


@cprr.case(name="healthy/py_group_made_and_left", world_sizes=[2],
           description="an all-reduce on a group the case makes and never destroys")
def made_and_left(ctx):
    pair = dist.new_group(list(range(ctx.world_size)))
    t = torch.full((8,), float(ctx.rank + 1), device=ctx.device)
    dist.all_reduce(t, group=pair)
    singles = [dist.new_group([r]) for r in range(ctx.world_size)]  # as new_subgroups does
    gone = dist.new_group(list(range(ctx.world_size)))
    # Used before it is ended: a rank that destroys a Gloo group at once may close its pairs
    # while a peer is still connecting them (that peer's new_group fails, a flaky case).
    dist.barrier(group=gone)
    dist.destroy_process_group(gone)  # one the case ends itself
    ctx.output("sum", t)


@cprr.case(name="healthy/py_groups_counted_after", world_sizes=[2])
def counted_after(ctx):
    ctx.output("groups", torch.tensor([_groups_known()], dtype=torch.int64))

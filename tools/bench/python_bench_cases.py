"""The cases cprr_bench_python times: one all-reduce of 1024 floats at W=2, checked, the same work
as torch_allreduce.py does under torchrun (run as ``cprecord --python`` runs its cases); and an
empty case, whose pooled time is cprr's own cost per Python case."""

import torch
import torch.distributed as dist

import cprr


@cprr.case(name="bench/py_all_reduce", world_sizes=[2])
def all_reduce(ctx):
    x = torch.full((1024,), float(ctx.rank + 1), device=ctx.device)
    dist.all_reduce(x)
    world = ctx.world_size
    assert x[0].item() == world * (world + 1) / 2, x[0].item()
    ctx.output("sum", x)


@cprr.case(name="bench/py_empty", world_sizes=[2])
def empty(ctx):
    pass

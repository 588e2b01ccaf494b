"""Diagnostic: torch's DistributedDataParallel under cprr's GPU op capture, as DistributedTest's
DDP tests use it (a plain step, gradients accumulated under no_sync, a static graph, gradients as
bucket views). Every case is correct: a finding on one is cprr's. On cpu too:

    cprecord --python tools/device/diag_cases/test_ddp.py --backend cpu|cuda --mode both --json

DDP's C++ calls its process group itself (_verify_params_across_processes, the reducer's
buckets), past torch.distributed's functions, where cprr logs collectives."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import cprr


def _model(ctx, **ddp_args):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                              torch.nn.Linear(16, 4)).to(ctx.device)
    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DDP(net, device_ids=ids, **ddp_args)


def _batch(ctx, step):
    g = torch.Generator().manual_seed(100 * step + ctx.rank)
    return torch.randn(4, 8, generator=g).to(ctx.device)


def _train(ctx, model, steps, accumulate=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        for micro in range(accumulate - 1):
            with model.no_sync():
                model(_batch(ctx, 10 * step + micro)).sum().backward()
        model(_batch(ctx, step)).sum().backward()
        opt.step()
        opt.zero_grad()
    for i, p in enumerate(model.parameters()):
        ctx.output(f"param{i}", p.detach())


@cprr.case(name="ddp/train", world_sizes=[2])
def train(ctx):
    _train(ctx, _model(ctx), steps=3)


@cprr.case(name="ddp/no_sync_accumulate", world_sizes=[2])
def no_sync_accumulate(ctx):
    _train(ctx, _model(ctx), steps=2, accumulate=3)


@cprr.case(name="ddp/static_graph", world_sizes=[2])
def static_graph(ctx):
    _train(ctx, _model(ctx, static_graph=True), steps=3)


@cprr.case(name="ddp/bucket_view_grads", world_sizes=[2])
def bucket_view_grads(ctx):
    _train(ctx, _model(ctx, gradient_as_bucket_view=True), steps=3)
    dist.barrier()

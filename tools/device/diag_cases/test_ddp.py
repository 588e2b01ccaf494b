"""Diagnostic: torch's DistributedDataParallel under cprr's GPU op capture, as DistributedTest's
DDP tests use it (a plain step, gradients accumulated under no_sync, a static graph, gradients as
bucket views, uneven inputs under Join) and its model averager. Every case is correct: a finding
on one is cprr's. On cpu too:

    cprecord --python tools/device/diag_cases/test_ddp.py --backend cpu|cuda --mode both --json

DDP's C++ calls its process group itself (_verify_params_across_processes, the reducer's
buckets), past torch.distributed's functions, where cprr logs collectives, and waits for Join's
Work in its reducer: cprr.distributed.torch_helpers says what cprr sees of it."""
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


@cprr.case(name="ddp/join_uneven_inputs", world_sizes=[2])
def join_uneven_inputs(ctx):
    # Rank 1 trains on two batches more; Join's all_reduce Work goes to the reducer (C++).
    model = _model(ctx)
    with model.join(divide_by_initial_world_size=False):
        for step in range(3 + 2 * ctx.rank):
            model(_batch(ctx, step)).sum().backward()
            model.zero_grad()
    ctx.output("param0", next(model.parameters()).detach())


@cprr.case(name="ddp/hierarchical_model_averager", world_sizes=[2])
def hierarchical_model_averager(ctx):
    # As DistributedTest's test_1_level_hierarchical_model_averager_...: the averager's subgroups
    # (new_subgroups), then periodic averaging of a parameter reset at each step.
    from collections import OrderedDict

    import torch.distributed.algorithms.model_averaging.averagers as averagers
    import torch.distributed.algorithms.model_averaging.hierarchical_model_averager as hierarchical

    model = torch.nn.Linear(1, 5, bias=False).to(ctx.device)
    param = next(model.parameters())
    start = torch.ones_like(param.data) * ctx.rank
    hierarchical.HierarchicalModelAverager(
        period_group_size_dict=OrderedDict([(4, ctx.world_size)]), warmup_steps=12)
    averager = averagers.PeriodicModelAverager(period=4, warmup_steps=12)
    for step in range(20):
        param.data = start.clone()
        param.grad = torch.ones_like(param.data)
        averager.average_parameters(model.parameters())
        averaged = step >= 12 and (step - 12) % 4 == 0
        want = torch.full_like(start, 0.5) if averaged else start
        assert torch.equal(param.data, want), (step, param.data)
    ctx.output("param", param.detach())

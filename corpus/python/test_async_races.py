"""A race between a case's own ops and an async collective, written as gradient-bucketing code
writes it; runs on every backend (gloo's async work on CPU tensors runs on its own thread).

Run with ``cprecord --python corpus/python --mode both``; the ``bug/`` case's seeded_bug is the
verdict cprr must reach, its ``fixed/`` twin must come out clean.
"""

import torch
import torch.distributed as dist

import cprr


def _bucketed_grad_norm(ctx, wait_first):
    # Each rank's gradient bucket: reduced asynchronously so the next bucket's work overlaps it.
    grad = torch.arange(4096, dtype=torch.float32, device=ctx.device) * (ctx.rank + 1)
    work = dist.all_reduce(grad, async_op=True)
    if wait_first:
        work.wait()
    norm = grad.norm()  # the bug: read while the all-reduce may still write the bucket
    if not wait_first:
        work.wait()
    ctx.output("grad", grad)
    return norm


@cprr.case(
    name="bug/py_async_allreduce_read",
    world_sizes=[2],
    seeded_bug="stream_race",
    description="a gradient bucket read (its norm) before the async all-reduce's work.wait()",
)
def async_allreduce_read(ctx):
    _bucketed_grad_norm(ctx, wait_first=False)


@cprr.case(
    name="fixed/py_async_allreduce_read",
    world_sizes=[2],
    description="the twin: work.wait() before the bucket is read",
)
def async_allreduce_read_fixed(ctx):
    _bucketed_grad_norm(ctx, wait_first=True)


def _two_buckets(ctx, wait_first):
    # Two buckets reduced asynchronously, each read (its norm) right after its all-reduce is
    # issued: two independent races, on two buffers, by two op pairs; the report names both.
    buckets = [torch.arange(n, dtype=torch.float32, device=ctx.device) * (ctx.rank + k)
               for k, n in ((1, 4096), (2, 2048))]
    pending = []
    for bucket in buckets:
        work = dist.all_reduce(bucket, async_op=True)
        if wait_first:
            work.wait()
        else:
            pending.append(work)
        bucket.norm()  # the bug: read while its all-reduce may still write it
    for work in pending:
        work.wait()
    ctx.output("first", buckets[0])
    ctx.output("second", buckets[1])


@cprr.case(
    name="bug/py_two_buckets_read_early",
    world_sizes=[2],
    seeded_bug="stream_race",
    description="two buckets, each read before its async all-reduce's wait(): two races",
)
def two_buckets_read_early(ctx):
    _two_buckets(ctx, wait_first=False)


@cprr.case(
    name="fixed/py_two_buckets_read_early",
    world_sizes=[2],
    description="the twin: each bucket's wait() before it is read",
)
def two_buckets_read_early_fixed(ctx):
    _two_buckets(ctx, wait_first=True)

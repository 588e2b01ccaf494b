"""Seed 002 in PyTorch's own terms: torch's symmetric memory on NCCL's symmetric kernels.

These need a GPU per rank (torch's symmetric memory and its NCCL backend run on NCCL, which
refuses two ranks on one GPU): ``cprecord --python corpus/python_nccl --backend cuda`` on a
machine with two GPUs or more, with ``CPRR_TORCH_ALLOCATOR=off`` (torch's symmetric pool is a
torch.cuda.MemPool, which needs torch's own caching allocator).

The pool symm_mem.get_mem_pool hands out gives the caching allocator segments; the first
symm_mem.rendezvous on a tensor in a segment registers it as an NCCL symmetric window (windows
pair up across ranks in the order they were registered). NCCL's all_reduce on a tensor in a
window runs a symmetric kernel, which reads each peer's copy of the window at this rank's offset
of the tensor. When the caching allocator later puts "the same" tensor into different windows on
two ranks, they sum the wrong bytes: the seed's fix moved registration off the caching
allocator; freeing in the same order on every rank also keeps the layouts equal.
"""

import torch
import torch.distributed as dist

import cprr

N = 256 * 1024  # 1 MiB of float32 (the seed's size): NCCL reads peers' windows directly at this size
# (below some 100 KiB its symmetric kernel stages through its own buffers, and offsets do not matter)


def _symmetric_pool(ctx):
    if dist.get_backend() != "nccl":
        raise RuntimeError(
            "this case needs a GPU per rank: torch's symmetric memory runs on NCCL, and this "
            "world's ranks share a GPU (their process group is gloo)")
    import torch.distributed._symmetric_memory as symm_mem

    symm_mem.set_backend("NCCL")
    return symm_mem.get_mem_pool(ctx.device)


def _expert_scratch(ctx, free_by_rank):
    import torch.distributed._symmetric_memory as symm_mem

    pool = _symmetric_pool(ctx)
    with torch.cuda.use_mem_pool(pool):
        scratch = [torch.full((N,), 100.0 * (e + 1), device=ctx.device) for e in range(2)]
    for t in scratch:
        symm_mem.rendezvous(t, dist.group.WORLD)  # windows #0 and #1 on every rank
    # Each rank drops the scratch of the expert it does not host (the bug), or every rank drops
    # the same one (the fix); the partial sum then takes the freed block, in that window.
    drop = ctx.rank % 2 if free_by_rank else 1
    kept = scratch[1 - drop]
    del scratch, t
    with torch.cuda.use_mem_pool(pool):
        partial = torch.full((N,), float(ctx.rank + 1), device=ctx.device)
    dist.all_reduce(partial)
    ctx.output("partial", partial)
    ctx.output("kept", kept)


@cprr.case(
    name="bug/py_symmetric_pool_reuse",
    world_sizes=[2],
    seeded_bug="allocator_order",
    description="seed 002 with torch's symmetric pool: ranks free different scratch buffers, "
    "the caching allocator reuses a different window per rank, NCCL's symmetric all_reduce "
    "sums the wrong bytes",
)
def symmetric_pool_reuse(ctx):
    _expert_scratch(ctx, free_by_rank=True)


@cprr.case(
    name="fixed/py_symmetric_pool_reuse",
    world_sizes=[2],
    description="the twin: every rank frees the same scratch buffer, so the partial sum is in "
    "the same window everywhere",
)
def symmetric_pool_reuse_fixed(ctx):
    _expert_scratch(ctx, free_by_rank=False)


@cprr.case(
    name="healthy/py_symm_mem_all_reduce",
    world_sizes=[2],
    description="symm_mem.empty buffers, rendezvous, NCCL's all_reduce on them: every element "
    "checked, no finding",
)
def symm_mem_all_reduce(ctx):
    _symmetric_pool(ctx)  # the NCCL backend, and the GPU-per-rank check
    import torch.distributed._symmetric_memory as symm_mem

    a = symm_mem.empty(N, device=ctx.device)
    b = symm_mem.empty(2 * N, device=ctx.device)
    symm_mem.rendezvous(a, dist.group.WORLD)
    symm_mem.rendezvous(b, dist.group.WORLD)
    a.fill_(float(ctx.rank + 1))
    b.fill_(float(2 * ctx.rank))
    dist.all_reduce(a)
    dist.all_reduce(b)
    w = ctx.world_size
    assert torch.all(a == w * (w + 1) / 2), "a: wrong sum"
    assert torch.all(b == w * (w - 1)), "b: wrong sum"
    ctx.output("a", a)
    ctx.output("b", b)

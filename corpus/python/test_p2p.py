"""Point-to-point in a batch, as pipeline and ring code writes it (``dist.batch_isend_irecv``):
runs on every backend; the bug reads the receive buffer before waiting for the batch's Works.

Run with ``cprecord --python corpus/python --mode both``; the ``bug/`` case's seeded_bug is the
verdict cprr must reach, its ``fixed/`` twin and the ring must come out clean.
"""

import torch
import torch.distributed as dist

import cprr


def _p2p_device(ctx):
    """Where point-to-point tensors live: the rank's GPU with NCCL; the host with gloo, whose
    send and recv take CPU tensors only (a CUDA tensor's address ends in 'writev: Bad address'),
    as where ranks share a GPU."""
    return ctx.device if dist.get_backend() == "nccl" else torch.device("cpu")


@cprr.case(name="healthy/py_batch_ring", world_sizes=[2, 4],
           description="each rank sends to its right and receives from its left in one batch")
def batch_ring(ctx):
    send = torch.full((256,), float(ctx.rank), device=_p2p_device(ctx))
    recv = torch.empty(256, device=_p2p_device(ctx))
    right, left = (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size
    ops = [dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    ctx.output("recv", recv)


def _exchange(ctx, wait_first):
    # Two pipeline stages swap activations; the stage then reduces what it received.
    acts = torch.arange(4096, dtype=torch.float32, device=_p2p_device(ctx)) * (ctx.rank + 1)
    recv = torch.zeros(4096, device=_p2p_device(ctx))
    peer = 1 - ctx.rank
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, acts, peer),
                                    dist.P2POp(dist.irecv, recv, peer)])
    if wait_first:
        for w in works:
            w.wait()
    total = recv.sum()  # the bug unless waited for: the receive may still be writing recv
    if not wait_first:
        for w in works:  # once: a gloo send's Work waits for one more send at each wait()
            w.wait()
    ctx.output("recv", recv)
    return total


@cprr.case(name="bug/py_batch_recv_read_early", world_sizes=[2], seeded_bug="stream_race",
           description="the received activations summed before the batch's Works are waited for")
def batch_recv_read_early(ctx):
    _exchange(ctx, wait_first=False)


@cprr.case(name="fixed/py_batch_recv_read_early", world_sizes=[2],
           description="the twin: every Work of the batch waited for before the sum")
def batch_recv_read_after_wait(ctx):
    _exchange(ctx, wait_first=True)

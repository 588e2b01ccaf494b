"""A 2x2 mesh at W=4, as tensor- and data-parallel code builds it: tp groups {0,1} and {2,3},
dp groups {0,2} and {1,3}, a pipeline over all four ranks. Each bug is planted in one group only
(or on one channel) and must be named with that group, its ranks and the collective's number (or
the message's); its twin, and the healthy cases, must come out clean.

Run with ``cprecord --python corpus/python --mode both``: each ``bug/`` case's seeded_bug is the
verdict cprr must reach, the ``fault/`` cases end as they expect (a hang), with the group or the
channel named in the summary.
"""

import inspect

import torch
import torch.distributed as dist

import cprr


def _mesh(ctx, backend=None):
    """(tp group, dp group) of this rank. Every rank makes every group, as torch requires, in one
    order: tp {0,1}, tp {2,3}, dp {0,2}, dp {1,3}; `backend`: theirs (None: the world's)."""
    tp = [dist.new_group([0, 1], backend=backend), dist.new_group([2, 3], backend=backend)]
    dp = [dist.new_group([0, 2], backend=backend), dist.new_group([1, 3], backend=backend)]
    return tp[ctx.rank // 2], dp[ctx.rank % 2]


def _host(ctx):
    """Where point-to-point tensors live: the GPU with NCCL, the host with gloo (its send and
    recv take CPU tensors only)."""
    return ctx.device if dist.get_backend() == "nccl" else torch.device("cpu")


@cprr.case(name="healthy/py_mesh_tp_dp", world_sizes=[4],
           description="a tp all-gather and a dp all-reduce of the gradient on a 2x2 mesh")
def mesh_tp_dp(ctx):
    tp, dp = _mesh(ctx)
    shard = torch.full((64,), float(ctx.rank + 1), device=ctx.device)
    full = [torch.empty(64, device=ctx.device) for _ in range(2)]
    dist.all_gather(full, shard, group=tp)
    grad = torch.cat(full) * 0.5
    dist.all_reduce(grad, group=dp)
    ctx.output("grad", grad)


# ---- a mismatch inside one tp group only ------------------------------------------------------


def _tp_reduce(ctx, same_size):
    tp, dp = _mesh(ctx)
    # The second tp group's last rank sizes its partial sums from a local count (the bug).
    rows = 6 if (not same_size and ctx.rank == 3) else 8
    partial = torch.full((rows, 16), float(ctx.rank), device=ctx.device)
    dist.all_reduce(partial, group=tp)
    dist.all_reduce(partial[:1], group=dp)
    ctx.output("partial", partial[:6])


@cprr.case(name="bug/py_tp_group_mismatch", world_sizes=[4], timeout_s=20,
           seeded_bug="collective_mismatch",
           description="rank 3 all-reduces 6 rows in its tp group, rank 2 all-reduces 8")
def tp_group_mismatch(ctx):
    _tp_reduce(ctx, same_size=False)


@cprr.case(name="fixed/py_tp_group_mismatch", world_sizes=[4],
           description="the twin: both ranks of each tp group all-reduce 8 rows")
def tp_group_mismatch_fixed(ctx):
    _tp_reduce(ctx, same_size=True)


# ---- an object collective called with another root in one dp group ---------------------------


def _object_leader(ctx, same_root):
    tp, dp = _mesh(ctx)
    config = [{"lr": 0.1 * (ctx.rank + 1), "step": ctx.rank}]
    # The checkpoint's holder is the dp group's first rank; the bug: rank 3 takes itself.
    leader = ctx.rank % 2
    if not same_root and ctx.rank == 3:
        leader = 3
    dist.broadcast_object_list(config, src=leader, group=dp)
    ctx.output("lr", torch.tensor([config[0]["lr"]], dtype=torch.float64))


@cprr.case(name="bug/py_object_root_mismatch", world_sizes=[4], timeout_s=20,
           seeded_bug="collective_mismatch",
           description="broadcast_object_list in dp group {1,3}: rank 1 from rank 1, rank 3 "
           "from rank 3")
def object_root_mismatch(ctx):
    _object_leader(ctx, same_root=False)


@cprr.case(name="fixed/py_object_root_mismatch", world_sizes=[4],
           description="the twin: both ranks of each dp group broadcast from its first rank")
def object_root_mismatch_fixed(ctx):
    _object_leader(ctx, same_root=True)


# ---- a dp group that hangs --------------------------------------------------------------------


@cprr.case(name="fault/py_dp_group_hang", world_sizes=[4], expect="hang", timeout_s=5,
           description="rank 3 skips its dp group's second all-reduce (an early exit on an "
           "empty batch); rank 1 waits in it, the others in the closing barrier")
def dp_group_hang(ctx):
    tp, dp = _mesh(ctx)
    grad = torch.ones(32, device=ctx.device)
    dist.all_reduce(grad, group=dp)
    if ctx.rank != 3:
        dist.all_reduce(grad, group=dp)
    ctx.output("grad", grad)
    dist.barrier()


# ---- a pipeline of 4 stages whose one stage sends one micro-batch short ----------------------


def _pipeline(ctx, microbatches, sent_by_stage_1):
    acts = torch.zeros(128, device=_host(ctx))
    outs = []
    for mb in range(microbatches):
        if ctx.rank > 0:
            dist.recv(acts, src=ctx.rank - 1)
        else:
            acts.fill_(float(mb + 1))
        acts = acts * 2
        if ctx.rank < ctx.world_size - 1 and (ctx.rank != 1 or mb < sent_by_stage_1):
            dist.send(acts, dst=ctx.rank + 1)
        outs.append(acts.clone())
    ctx.output("acts", torch.stack(outs))


@cprr.case(name="fault/py_pipeline_recv_never_sent", world_sizes=[4], expect="hang",
           timeout_s=5,
           description="stage 1 loops over one micro-batch fewer when sending: stage 2 waits "
           "in its last recv")
def pipeline_recv_never_sent(ctx):
    _pipeline(ctx, 4, sent_by_stage_1=3)


@cprr.case(name="healthy/py_pipeline_4_stages", world_sizes=[4],
           description="the twin: every stage sends every micro-batch")
def pipeline_4_stages(ctx):
    _pipeline(ctx, 4, sent_by_stage_1=4)


# ---- an isend whose buffer is rewritten before the wait ---------------------------------------


def _send_activation(ctx, wait_first):
    tp, dp = _mesh(ctx)
    peer = ctx.rank ^ 1  # the other rank of the tp group
    acts = torch.arange(2048, dtype=torch.float32, device=_host(ctx)) + ctx.rank
    recv = torch.empty(2048, device=_host(ctx))
    if ctx.rank % 2 == 0:
        work = dist.isend(acts, dst=peer, group=tp)
        if wait_first:
            work.wait()
        acts.mul_(0.5)  # the bug unless waited for: the send may still read it
        if not wait_first:
            work.wait()
    else:
        dist.recv(recv, src=peer, group=tp)
    ctx.output("acts", acts)


@cprr.case(name="bug/py_isend_buffer_rewritten", world_sizes=[4],
           seeded_bug="stream_race",
           description="the even rank of each tp group scales its activations in place before "
           "its isend's Work is waited for")
def isend_buffer_rewritten(ctx):
    _send_activation(ctx, wait_first=False)


@cprr.case(name="fixed/py_isend_buffer_rewritten", world_sizes=[4],
           description="the twin: the Work is waited for before the buffer is scaled")
def isend_buffer_rewritten_fixed(ctx):
    _send_activation(ctx, wait_first=True)


# ---- an MoE dispatch whose receive counts were never exchanged ---------------------------------


def _dispatch(ctx, exchange_counts):
    # Each rank routes its tokens to the experts of every rank: how many go where depends on the
    # rank. The receiver must learn how many rows come from each sender before the all-to-all.
    hidden, w = 8, ctx.world_size
    send_counts = [(ctx.rank + 2 * peer) % 5 + 1 for peer in range(w)]
    tokens = torch.full((sum(send_counts), hidden), float(ctx.rank), device=_host(ctx))
    if exchange_counts:
        counts = torch.tensor(send_counts, dtype=torch.int64, device=_host(ctx))
        got = torch.empty_like(counts)
        dist.all_to_all_single(got, counts)
        recv_counts = got.tolist()
    else:
        recv_counts = send_counts  # the bug: what this rank sends is not what it receives
    out = torch.empty((sum(recv_counts), hidden), device=_host(ctx))
    dist.all_to_all_single(out, tokens, output_split_sizes=recv_counts,
                           input_split_sizes=send_counts)
    ctx.output("routed", out)


@cprr.case(name="bug/py_moe_counts_not_exchanged", world_sizes=[4], timeout_s=20,
           seeded_bug="collective_mismatch",
           description="an MoE dispatch sizes its receive buffer from its own send counts")
def moe_counts_not_exchanged(ctx):
    _dispatch(ctx, exchange_counts=False)


@cprr.case(name="fixed/py_moe_counts_not_exchanged", world_sizes=[4],
           description="the twin: the counts go through an all-to-all first")
def moe_counts_exchanged(ctx):
    _dispatch(ctx, exchange_counts=True)


# ---- the same mesh through DeviceMesh, where torch has it ---------------------------------------


@cprr.case(name="healthy/py_device_mesh", world_sizes=[4],
           description="a 2x2 DeviceMesh (dp, tp): its dimensions' groups are recorded with "
           "torch's names for them; torch without DeviceMesh makes the same groups by hand")
def device_mesh(ctx):
    try:
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError:  # torch < 2.2
        init_device_mesh = None
    if init_device_mesh is not None:
        mesh = init_device_mesh(ctx.device.type, (2, 2), mesh_dim_names=("dp", "tp"))
        dp, tp = mesh.get_group("dp"), mesh.get_group("tp")
    else:
        tp, dp = _mesh(ctx)
    x = torch.full((16,), float(ctx.rank), device=ctx.device)
    dist.all_reduce(x, group=tp)
    dist.all_reduce(x, group=dp)
    ctx.output("x", x)


# ---- messages from any source -------------------------------------------------------------------


@cprr.case(name="healthy/py_recv_from_any_source", world_sizes=[4],
           description="the tp group's second rank receives without naming the sender, and the "
           "dp groups pass their configs with send_object_list / recv_object_list (gloo groups: "
           "NCCL has no receive from any source)")
def recv_from_any_source(ctx):
    tp, dp = _mesh(ctx, backend="gloo")
    t = torch.full((32,), float(ctx.rank))
    if ctx.rank % 2 == 0:
        dist.send(t, dst=ctx.rank + 1, group=tp)
        dist.send(t * 2, dst=ctx.rank + 1, group=tp)
    else:
        sender = dist.recv(t, group=tp)  # from any source
        assert sender == ctx.rank - 1, sender
        work = dist.irecv(t, group=tp)  # from any source too
        work.wait()
    if hasattr(dist, "recv_object_list"):  # torch >= 2.0
        objs = [{"rank": ctx.rank}]
        if ctx.rank < 2:
            dist.send_object_list(objs, dst=ctx.rank + 2, group=dp)
        else:
            # Its two recvs from any source, where torch allows it (2.x wants the source).
            any_source = "group_src" not in inspect.signature(dist.recv_object_list).parameters
            dist.recv_object_list(objs, src=None if any_source else ctx.rank - 2, group=dp)
    ctx.output("t", t)


# ---- a trap: two groups of the same ranks, called in another order on each rank ---------------


@cprr.case(name="healthy/py_same_ranks_two_groups", world_sizes=[2],
           description="two gloo groups of ranks {0,1} (gradients and metrics) with other sizes, "
           "issued async in the opposite order on each rank: each group's calls agree (on NCCL "
           "communicators that order is a real deadlock)")
def same_ranks_two_groups(ctx):
    grads = dist.new_group([0, 1], backend="gloo")
    metrics = dist.new_group([0, 1], backend="gloo")
    g = torch.ones(256)
    m = torch.full((4,), float(ctx.rank))
    if ctx.rank == 0:
        works = [dist.all_reduce(g, group=grads, async_op=True),
                 dist.all_reduce(m, group=metrics, async_op=True)]
    else:
        works = [dist.all_reduce(m, group=metrics, async_op=True),
                 dist.all_reduce(g, group=grads, async_op=True)]
    for w in works:
        w.wait()
    ctx.output("grads", g)
    ctx.output("metrics", m)

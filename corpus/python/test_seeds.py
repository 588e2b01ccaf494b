"""The seeds as PyTorch tests: each bug beside its fixed twin, written as their owners write them.

Run them with ``cprecord --python corpus/python --mode both``; each ``bug/*`` case's seeded_bug
is the verdict cprr must reach, and each ``fixed/*`` twin must come out clean. The C++ corpus
(corpus/*.cpp) holds the same bugs against cprr's own Case API.
"""

import copy
import math

import torch
import torch.distributed as dist

import cprr

# ---- seed 001's state leak: a module-level config table one case rewrites in place ----------

# TransformerEngine's context-parallel tests keep their model configs in a module-level dict;
# one test rewrote an entry for the thd format, and every later test in the same process that
# read that entry got the rewritten mask: a failure only in a reused process, only after thd.
MODEL_CONFIGS = {"cp_1_0": {"heads": 2, "seq": 32, "dim": 8, "mask": "causal"}}
# The twin's own table: the bug case rewrites MODEL_CONFIGS in every process it runs in, and a
# twin reading that table after it would be polluted by it (rightly named so by cprr).
FIXED_MODEL_CONFIGS = copy.deepcopy(MODEL_CONFIGS)


def _attend(ctx, cfg):
    """A context-parallel attention step: each rank attends over its share of the keys, the
    partial outputs are summed across ranks."""
    seq, dim = cfg["seq"], cfg["dim"]
    # Drawn on the CPU generator (the same numbers on every device), then moved.
    q, k, v = (torch.randn(cfg["heads"], seq, dim).to(ctx.device) for _ in range(3))
    scores = q @ k.transpose(-1, -2) / math.sqrt(dim)
    keep = torch.ones(seq, seq, dtype=torch.bool, device=ctx.device)
    if "causal" in cfg["mask"]:
        keep = torch.tril(keep)
    if cfg["mask"].startswith("padding"):
        keep[:, seq - 4:] = False  # the padded tail of each sequence
    share = torch.zeros(seq, dtype=torch.bool, device=ctx.device)
    share[ctx.rank::ctx.world_size] = True  # this rank's keys
    scores = scores.masked_fill(~(keep & share), float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
    out = weights @ v
    dist.all_reduce(out)
    ctx.output("attention", out)


@cprr.case(
    name="bug/py_config_mutation",
    world_sizes=[2, 4],
    grid={"format": ["thd", "bshd"]},
    seeded_bug="state_leak",
    description="the thd branch rewrites a module-level config in place; a later bshd case "
    "reading the same entry differs only pooled",
)
def config_mutation(ctx):
    cfg = MODEL_CONFIGS["cp_1_0"]  # the shared entry itself: the bug
    if ctx.param("format") == "thd" and cfg["mask"] == "causal":
        cfg["mask"] = "padding_causal"
    _attend(ctx, cfg)


@cprr.case(
    name="fixed/py_config_mutation",
    world_sizes=[2, 4],
    grid={"format": ["thd", "bshd"]},
    description="the twin: the thd branch changes its own copy of the config",
)
def config_mutation_fixed(ctx):
    cfg = copy.deepcopy(FIXED_MODEL_CONFIGS["cp_1_0"])
    if ctx.param("format") == "thd" and cfg["mask"] == "causal":
        cfg["mask"] = "padding_causal"
    _attend(ctx, cfg)


# ---- an accumulator read before anything wrote it -------------------------------------------


def _accumulate(ctx, zeroed):
    n = 4096
    if zeroed:
        acc = torch.zeros(n, device=ctx.device)
    else:
        acc = torch.empty(n, device=ctx.device)  # the bug: never zeroed
    for step in range(3):
        grad = torch.full((n,), float(ctx.rank + step), device=ctx.device)
        acc += grad
    dist.all_reduce(acc)
    ctx.output("grad_acc", acc)
    w = ctx.world_size
    want = float(3 * (w * (w - 1) // 2) + 3 * w)
    assert torch.all(acc == want), f"grad_acc[0] = {acc[0].item()}, expected {want}"


@cprr.case(
    name="bug/py_uninitialized_read",
    world_sizes=[2, 4],
    seeded_bug="uninitialized_read",
    description="a gradient accumulator from torch.empty, never zeroed",
)
def uninitialized_read(ctx):
    _accumulate(ctx, zeroed=False)


@cprr.case(
    name="fixed/py_uninitialized_read",
    world_sizes=[2, 4],
    description="the twin: the accumulator starts from torch.zeros",
)
def uninitialized_read_fixed(ctx):
    _accumulate(ctx, zeroed=True)


# ---- never-written bytes carried by copies to the op that uses them -------------------------


def _staged_buckets(ctx, filled):
    n = 1024
    # A staging buffer made as torch.empty(n).pin_memory() makes one (a copy of never-written
    # bytes), cloned into a bucket and packed with the bias: copies that only move bytes, not
    # uses of them. The scale is the use.
    staging = torch.empty(n, device=ctx.device).clone()
    if filled:  # the twin overwrites every byte before the copies
        staging.copy_(torch.full((n,), float(ctx.rank + 1), device=ctx.device))
    bucket = staging.clone()
    packed = torch.cat([bucket, torch.ones(n, device=ctx.device)])
    packed.mul_(0.5)
    dist.all_reduce(packed)
    ctx.output("packed", packed)


@cprr.case(
    name="bug/py_uninitialized_copied",
    world_sizes=[2],
    seeded_bug="uninitialized_read",
    description="a never-written staging buffer copied, cloned, packed by cat, then scaled: "
    "named at the scale, with the three copies that carried the bytes there",
)
def uninitialized_copied(ctx):
    _staged_buckets(ctx, filled=False)


@cprr.case(
    name="fixed/py_uninitialized_copied",
    world_sizes=[2],
    description="the twin: the staging buffer (a copy of never-written bytes, which is no read "
    "of them) is overwritten whole before it is cloned",
)
def uninitialized_copied_fixed(ctx):
    _staged_buckets(ctx, filled=True)


def _expert_load(ctx, zeroed):
    experts = 8
    # Each rank counts the tokens its router sent to each expert; a rank that routed nothing to
    # an expert never writes that expert's count when its buffer comes from torch.empty. The
    # all-gather only moves those bytes to every rank: the sum over ranks is the use.
    tokens = torch.arange(16, device=ctx.device) % (experts - 2 * ctx.rank)
    counts = (torch.zeros if zeroed else torch.empty)(experts, device=ctx.device)
    for e in tokens.unique().tolist():
        counts[e] = (tokens == e).sum()
    gathered = torch.empty(ctx.world_size, experts, device=ctx.device)
    dist.all_gather(list(gathered.unbind(0)), counts)
    load = gathered.sum(0)
    ctx.output("expert_load", load)


@cprr.case(
    name="bug/py_uninitialized_gathered",
    world_sizes=[2],
    seeded_bug="uninitialized_read",
    description="expert counts in torch.empty, written only for experts the rank routed to, "
    "all-gathered and summed: named at the sum, with the all-gather that brought rank 1's "
    "never-written counts",
)
def uninitialized_gathered(ctx):
    _expert_load(ctx, zeroed=False)


@cprr.case(
    name="fixed/py_uninitialized_gathered",
    world_sizes=[2],
    description="the twin: the counts start from torch.zeros",
)
def uninitialized_gathered_fixed(ctx):
    _expert_load(ctx, zeroed=True)


@cprr.case(
    name="healthy/py_collectives_into_empty",
    world_sizes=[2],
    description="a trap for the never-written check: collectives and a message write whole the "
    "torch.empty buffers they receive into (all_gather, broadcast on the other rank, "
    "all_to_all_single, recv) and send only written bytes, or read only the written half of "
    "each row a peer half-wrote, through one strided view: no finding",
)
def collectives_into_empty(ctx):
    w, d = ctx.world_size, ctx.device
    mine = torch.full((4,), float(ctx.rank + 1), device=d)
    gathered = torch.empty(w, 4, device=d)
    dist.all_gather(list(gathered.unbind(0)), mine)
    shared = torch.full((4,), 7.0, device=d) if ctx.rank == 0 else torch.empty(4, device=d)
    dist.broadcast(shared, src=0)
    exchanged = torch.empty(2 * w, device=d)
    dist.all_to_all_single(exchanged, torch.arange(2 * w, device=d, dtype=torch.float32))
    got = torch.empty(4, device=d)
    if ctx.rank == 0:
        dist.send(mine, dst=1)
        got.copy_(mine)
    elif ctx.rank == 1:
        dist.recv(got, src=0)
    # Each rank fills only the first half of its row; only those halves are read, through one
    # strided view (its runs: the never-written halves between them are not read).
    halves = torch.empty(4, device=d)
    halves[:2] = float(ctx.rank)
    rows = torch.empty(w, 4, device=d)
    dist.all_gather(list(rows.unbind(0)), halves)
    written = rows[:, :2].sum()
    total = gathered.sum() + shared.sum() + exchanged.sum() + got.sum() + written
    ctx.output("total", total.reshape(1))


# ---- a collective called with a different size on one rank ----------------------------------


def _token_stats(ctx, padded):
    tokens, hidden = 30, 4
    per_rank = math.ceil(tokens / ctx.world_size)
    begin = ctx.rank * per_rank
    mine = max(0, min(tokens, begin + per_rank) - begin)
    rows = per_rank if padded else mine  # the bug: the last rank's shard is shorter
    stats = torch.zeros(rows, hidden, device=ctx.device)
    stats[:mine] = float(ctx.rank + 1)
    dist.all_reduce(stats)
    ctx.output("token_stats", stats)


@cprr.case(
    name="bug/py_collective_size_mismatch",
    world_sizes=[4],
    timeout_s=20,
    seeded_bug="collective_mismatch",
    description="a sequence the world size does not divide: the last rank all-reduces its "
    "shorter shard",
)
def collective_size_mismatch(ctx):
    _token_stats(ctx, padded=False)


@cprr.case(
    name="fixed/py_collective_size_mismatch",
    world_sizes=[4],
    description="the twin: every rank pads its shard to the same number of tokens",
)
def collective_size_mismatch_fixed(ctx):
    _token_stats(ctx, padded=True)


# ---- seed 002: a registered buffer placed by rank-dependent allocation order ----------------


def _symmetric_accumulate(ctx, same_order):
    # sglang-style: scratch buffers from the registered (symmetric) pool, allocated in an order
    # that depends on the rank; the k-th allocation then sits at a different offset per rank.
    if same_order or ctx.rank % 2 == 0:
        scratch = ctx.symmetric_empty(256, name="scratch")
        acc = ctx.symmetric_empty(1024, name="acc")
    else:
        acc = ctx.symmetric_empty(1024, name="acc")
        scratch = ctx.symmetric_empty(256, name="scratch")
    scratch.zero_()
    acc.fill_(float(ctx.rank + 1))
    dist.all_reduce(acc)
    ctx.output("acc", acc)


@cprr.case(
    name="bug/py_symmetric_alloc_order",
    world_sizes=[2, 4],
    seeded_bug="allocator_order",
    description="seed 002: odd ranks allocate their symmetric buffers in another order, so the "
    "accumulator sits at different symmetric offsets",
)
def symmetric_alloc_order(ctx):
    _symmetric_accumulate(ctx, same_order=False)


@cprr.case(
    name="fixed/py_symmetric_alloc_order",
    world_sizes=[2, 4],
    description="the twin: every rank allocates in the same order",
)
def symmetric_alloc_order_fixed(ctx):
    _symmetric_accumulate(ctx, same_order=True)


# ---- healthy ------------------------------------------------------------------------------


@cprr.case(name="healthy/py_collectives", world_sizes=[1, 2, 4], grid={"n": [1, 1000]})
def collectives(ctx):
    """all_reduce, all_gather, broadcast and reduce_scatter, every element checked"""
    n, w, r = ctx.param("n"), ctx.world_size, ctx.rank
    x = torch.full((n,), float(r + 1), device=ctx.device)
    dist.all_reduce(x)
    assert torch.all(x == w * (w + 1) / 2)
    parts = [torch.empty(n, device=ctx.device) for _ in range(w)]
    dist.all_gather(parts, torch.full((n,), float(r), device=ctx.device))
    gathered = torch.cat(parts)
    assert torch.equal(gathered, torch.arange(w, device=ctx.device).repeat_interleave(n).float())
    b = torch.arange(n, device=ctx.device, dtype=torch.float64) * (r + 1)
    dist.broadcast(b, src=w - 1)
    assert torch.equal(b, torch.arange(n, device=ctx.device, dtype=torch.float64) * w)
    dist.barrier()
    ctx.output("all_reduce", x)
    ctx.output("all_gather", gathered)
    ctx.output("broadcast", b)


# ---- a data-parallel training step (on cuda, autograd runs the backward on its own thread) ---


@cprr.case(
    name="healthy/py_training_step",
    world_sizes=[2],
    description="a data-parallel step as DDP tests write it: forward, loss.backward() (on cuda "
    "autograd runs it on its own thread, with its own stream syncs), each gradient all-reduced "
    "and averaged: no finding",
)
def training_step(ctx):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4)).to(ctx.device)
    x = torch.randn(6, 8, device=ctx.device) + ctx.rank
    loss = model(x).square().mean()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= ctx.world_size
    ctx.output("grads", torch.cat([p.grad.flatten() for p in model.parameters()]))

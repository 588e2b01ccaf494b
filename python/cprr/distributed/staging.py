"""Point-to-point messages of CUDA tensors through host memory, where cprr chose Gloo.

Ranks sharing one GPU cannot use NCCL (it refuses two ranks on one device), so cprr makes their
default group Gloo (cprr.rank.worker_loop). Gloo's collectives take CUDA tensors, but its send and
recv hand the tensor's device pointer to a socket (``writev: Bad address``): a case written for NCCL
would fail there for cprr's choice, not for its own bug. So where the world is cprr's Gloo on
cuda, a CUDA tensor's message goes through a host copy: a send copies it out first (ordered after
the stream's work, as NCCL's send would be), a recv receives into a host tensor and copies it in
once the message is there (at once for recv; at the Work's wait, or when is_completed() first says
True, for irecv). The copies run inside the call, which the op log already holds as one op, so
they are not logged apart. A group the case made with an explicit "gloo" is staged the same way.
"""

import contextlib
import copy

import torch

from cprr.api import running as _running
from cprr.distributed import groups as _groups
from cprr.distributed import process_group as _process_group
from cprr.distributed import work as _work


def _own():
    """The block of the staging's own aten work: not the case's ops (the op log has the call
    as one op, reading what it sends, writing what it receives), nor CUDA work outside it."""
    c = _running.capture()
    own = getattr(c, "own_work", None)
    return own() if own is not None else contextlib.nullcontext()


def wanted(native, group, tensor):
    """Whether `tensor`'s message in `group` goes through host memory: a CUDA tensor, in a Gloo
    group of a world whose transport stages (cprr.distributed.process_group.plan: a cuda world
    whose ranks share a GPU)."""
    if native is None or not _process_group.plan(native.transport).staged:
        return False
    if not isinstance(tensor, torch.Tensor) or not tensor.is_cuda:
        return False
    try:
        return _groups.backend_of(group) == "gloo"
    except (RuntimeError, ValueError):  # not a group of this rank: torch says so itself
        return False


def host_copy(tensor):
    """A host tensor of `tensor`'s shape and type holding its bytes (a blocking copy: it waits
    for the stream's work on it)."""
    with _own():
        return tensor.detach().to("cpu", copy=True)


def host_like(tensor):
    with _own():
        return torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")


def copy_in(host, target):
    """What came into `host` copied to the case's tensor."""
    with _own(), torch.no_grad():
        target.copy_(host)


def _copy_in_when_done(work, pairs):
    """An irecv's (or a batch's) Work: its received host tensors are copied to their CUDA
    targets once it is known done (cprr.distributed.work.on_done). The case gets torch's Work."""
    pairs = list(pairs)  # (host, target)

    def copy_all(_):
        for host, target in pairs:
            copy_in(host, target)

    if pairs:
        _work.on_done(work, copy_all)
    return work


def message(name, original, signature, args, kwargs):
    """A callable running `original` (send, isend, recv or irecv, bound from args and kwargs
    by `signature`) with its tensor staged through host memory."""
    bound = signature.bind(*args, **kwargs)
    target = bound.arguments["tensor"]
    sending = name in ("send", "isend")

    def call():
        host = host_copy(target) if sending else host_like(target)
        bound.arguments["tensor"] = host
        result = original(*bound.args, **bound.kwargs)
        if sending:
            return result
        if name == "recv":
            copy_in(host, target)
            return result
        return _copy_in_when_done(result, [(host, target)]) if result is not None else result

    return call


def batch(original, ops, staged, args, kwargs):
    """A callable running batch_isend_irecv with the ops whose `staged` entry is "isend" or
    "irecv" (None: as it is) sent or received through host tensors; the recvs are copied in once
    their Work is done (a Work per op; one Work for the batch takes them all)."""

    def call():
        pairs, hosts = [], []
        for p, kind in zip(ops, staged):
            if kind is None:
                hosts.append(p)
                pairs.append(None)
                continue
            receiving = kind == "irecv"
            host = host_like(p.tensor) if receiving else host_copy(p.tensor)
            q = copy.copy(p)  # a P2POp: its peer, group and tag as the case gave them
            q.tensor = host
            hosts.append(q)
            pairs.append((host, p.tensor) if receiving else None)
        works = original(hosts, *args, **kwargs)
        if works is None:
            return works
        works = list(works)
        if len(works) == len(ops):
            return [_copy_in_when_done(w, [pair] if pair else []) for w, pair in zip(works, pairs)]
        last = [p for p in pairs if p]
        return [_copy_in_when_done(w, last if i == len(works) - 1 else [])
                for i, w in enumerate(works)]

    return call

"""torch's default process group of a rank, made once its world is connected and kept by every
case of the world, and the one decision of what the world's transport (the controller's choice,
``_cprr.Transport``) means on the Python side: torch's backend, and whether a CUDA tensor's
message is staged through host memory (cprr.distributed.staging).
"""

import collections
import inspect
import os

import torch
import torch.distributed as dist

from cprr import _cprr

# backend: torch's backend of the default group; staged: CUDA tensors' point-to-point messages go
# through host memory (Gloo's send and recv cannot take a device pointer).
Plan = collections.namedtuple("Plan", "backend staged")


def plan(transport):
    """What `transport` means for torch: NCCL where every rank has a GPU of its own; Gloo where
    ranks share one (NCCL refuses two ranks on one GPU), its CUDA messages staged; Gloo on cpu.
    Not "cpu:gloo,cuda:nccl": dist.get_backend() would then say so, and cases choose their
    device by it being "nccl"."""
    if transport == _cprr.Transport.nccl:
        return Plan("nccl", staged=False)
    return Plan("gloo", staged=transport == _cprr.Transport.gloo_staged)


def make_default(rank, transport, device_index):
    """The default process group, made once the world is connected (cprr.rank.worker_loop) and
    kept by its cases, on the backend plan(transport) names."""
    if dist.is_initialized():
        return
    backend = plan(transport).backend
    store = os.path.join(rank.rendezvous or ".", "torch_process_group")
    options = {}
    if backend == "nccl" and "device_id" in inspect.signature(dist.init_process_group).parameters:
        # The NCCL communicator now, not at the first collective: torch's symmetric memory on
        # NCCL (symm_mem.empty) needs it, and dies of a null communicator without (torch 2.11).
        options["device_id"] = torch.device("cuda", device_index)
    dist.init_process_group(
        backend,
        init_method=f"file://{store}",
        rank=rank.rank,
        world_size=rank.world_size,
        **options,
    )

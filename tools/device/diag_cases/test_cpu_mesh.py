"""Diagnostic: a DeviceMesh made in a case that never called init_process_group. Under its own
harness (torchrun) torch's DeviceMesh makes the default group itself by init_process_group(),
torch's default backend for each device (cpu: gloo, cuda: nccl); inside a case the world's group
is already there. Every case is correct: a failure or a finding is cprr's. Torch 2.2 on (no
DeviceMesh before: each case skips). On the GPU machine, where the world's group is NCCL:

    cprecord --python tools/device/diag_cases/test_cpu_mesh.py --backend cuda --mode both --json

cprr.distributed.backends.use_for_mesh gives the CPU mesh gloo; the CUDA mesh keeps the world's."""
import unittest

import torch
import torch.distributed as dist

import cprr


def _mesh(device_type, world_size):
    try:
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError as e:
        raise unittest.SkipTest(f"this torch has no DeviceMesh: {e}")
    return init_device_mesh(device_type, (world_size,))


def _summed(ctx, group, device):
    t = torch.full((4,), float(ctx.rank + 1), device=device)
    dist.all_reduce(t, group=group)
    expected = ctx.world_size * (ctx.world_size + 1) / 2
    assert torch.all(t == expected), (t, expected)
    return t


@cprr.case(name="mesh/cpu_without_init", world_sizes=[1, 2])
def cpu_without_init(ctx):
    mesh = _mesh("cpu", ctx.world_size)
    ctx.output("sum", _summed(ctx, mesh.get_group(), "cpu"))


@cprr.case(name="mesh/device_without_init", world_sizes=[1, 2])
def device_without_init(ctx):
    # The world's own device: its group runs it, and stays the default.
    backend = dist.get_backend()
    mesh = _mesh(ctx.device.type, ctx.world_size)
    assert dist.get_backend() == backend, (dist.get_backend(), backend)
    ctx.output("sum", _summed(ctx, mesh.get_group(), ctx.device))


@cprr.case(name="mesh/world_after_a_cpu_mesh", world_sizes=[1, 2])
def world_after_a_cpu_mesh(ctx):
    # Pooled after the CPU mesh's case: the world's group is the default again.
    ctx.output("sum", _summed(ctx, None, ctx.device))

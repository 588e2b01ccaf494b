"""Faults a Python rank survives as a C++ rank does: each case expects the status cprr must give."""

import os
import signal

import torch
import torch.distributed as dist

import cprr


@cprr.case(name="fault/py_exception", world_sizes=[2], expect="fail")
def exception(ctx):
    """rank 1 raises: the case fails with the traceback, its world stays usable"""
    x = torch.ones(4, device=ctx.device)
    dist.all_reduce(x)
    if ctx.rank == 1:
        raise ValueError(f"rank {ctx.rank} found {x.sum().item()}")


@cprr.case(name="fault/py_exception_before_collective", world_sizes=[2], expect="fail")
def exception_before_collective(ctx):
    """rank 1 raises between two all-reduces: its fail at once, rank 0 released from the second"""
    x = torch.ones(4, device=ctx.device)
    dist.all_reduce(x)
    if ctx.rank == 1:
        raise ValueError(f"rank {ctx.rank} found {x.sum().item()}")
    dist.all_reduce(x)


@cprr.case(name="fault/py_segfault", world_sizes=[2], expect="crash")
def segfault(ctx):
    """rank 1 dies by a signal in the middle of the case"""
    if ctx.rank == 1:
        os.kill(os.getpid(), signal.SIGSEGV)
    dist.barrier()


@cprr.case(name="fault/py_skipped_collective", world_sizes=[2], expect="hang", timeout_s=5)
def skipped_collective(ctx):
    """rank 1 skips the all-reduce: rank 0 waits in it until cprr's deadline names the hang"""
    x = torch.ones(4, device=ctx.device)
    if ctx.rank == 0:
        dist.all_reduce(x)


@cprr.case(name="healthy/py_prints", world_sizes=[1, 2])
def prints(ctx):
    """output on stdout and stderr goes to the logs, never the protocol"""
    print(f"rank {ctx.rank} says hello", flush=False)
    os.write(1, b"raw bytes on fd 1\n")
    os.write(2, b"\x00\xff binary on fd 2\n")
    ctx.output("rank", torch.tensor([ctx.rank], dtype=torch.int64))

"""suites_bench's per-rank harness, as DeepSpeed's DistributedTest has it: under plain pytest each
test of a DistributedTest class runs in a multiprocessing Pool of world_size processes started for
it (forkserver, as DeepSpeed sets), which imports the test's module and runs the method; under a
launcher that started the ranks already (cprecord --pytest, torchrun -m pytest: RANK is set) every
rank runs the test in place."""

import importlib.util
import os
import socket
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class DistributedTest:
    world_size = 2


def _backend():
    # NCCL takes one GPU per rank: ranks sharing a GPU talk through gloo.
    return "nccl" if torch.cuda.device_count() >= int(os.environ["WORLD_SIZE"]) else "gloo"


def _run(path, cls_name, method, kwargs, rank, world_size, port):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    spec = importlib.util.spec_from_file_location("bench_items_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))
    spec.loader.exec_module(module)
    dist.init_process_group(_backend())
    try:
        getattr(getattr(module, cls_name)(), method)(**kwargs)
    finally:
        dist.destroy_process_group()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    if "RANK" in os.environ or item.cls is None or not issubclass(item.cls, DistributedTest):
        if "RANK" in os.environ and not dist.is_initialized():
            dist.init_process_group(_backend())
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kwargs = {name: item.funcargs[name] for name in item._fixtureinfo.argnames}
    world_size = item.cls.world_size
    with mp.get_context("forkserver").Pool(world_size) as pool:
        pool.starmap(_run, [(str(item.path), item.cls.__name__, item.originalname, kwargs, r,
                             world_size, port) for r in range(world_size)])
    item.runtest = lambda: None

"""This folder's harness, in DeepSpeed's style: a test class derives from DistributedTest and says
its world_size; each of its tests runs in world_size processes. Under a launcher that started
the ranks already (``torchrun -m pytest``, ``cprecord --pytest``: RANK and WORLD_SIZE are set),
every rank runs each test in place; under plain ``pytest`` the harness forks a process per rank per test (fork, so the test's fixtures come along), as DeepSpeed's
DistributedTest starts a multiprocessing Pool per test."""

import os
import socket
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class DistributedTest:
    world_size = 2
    is_dist_test = True


def pytest_configure(config):
    config.addinivalue_line("markers", "world_size(n): the number of ranks a test runs on")


def _launched():
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _backend():
    # NCCL takes one GPU per rank: ranks sharing a GPU talk through gloo.
    return "nccl" if torch.cuda.device_count() >= int(os.environ["WORLD_SIZE"]) else "gloo"


def _run_rank(item, rank, world_size, port, errors):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        dist.init_process_group(_backend())
        names = item._fixtureinfo.argnames
        item.obj(**{name: item.funcargs[name] for name in names})
        dist.destroy_process_group()
    except pytest.skip.Exception as e:
        errors.put(("skip", e.msg))
        os._exit(1)
    except BaseException:
        errors.put(("fail", f"rank {rank}: {traceback.format_exc()}"))
        os._exit(1)
    os._exit(0)


def _world_size(item):
    marker = item.get_closest_marker("world_size")
    return marker.args[0] if marker else getattr(item.cls, "world_size", 1)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    if _launched():
        if not dist.is_initialized():
            dist.init_process_group(_backend())
        return  # pytest calls the test in this rank
    world_size = _world_size(item)
    if world_size == 1 and not getattr(item.cls, "is_dist_test", False):
        return
    port = _free_port()
    context = mp.get_context("fork")
    errors = context.SimpleQueue()
    ranks = [context.Process(target=_run_rank, args=(item, r, world_size, port, errors))
             for r in range(world_size)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=120)
    if any(p.exitcode != 0 for p in ranks):
        kind, text = errors.get() if not errors.empty() else ("fail", "a rank died")
        if kind == "skip":
            pytest.skip(text)
        raise AssertionError(text)
    item.runtest = lambda: None  # ran in the pool


@pytest.fixture
def device():
    if torch.cuda.is_available():
        d = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.cuda.set_device(d)
        return d
    return torch.device("cpu")

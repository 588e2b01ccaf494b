"""cprr as torch's CUDA allocator, the Python side (cprr.rank.torch_allocator): when a rank swaps
torch's allocator (cprr.rank.case_setup's Rank says where), and torch.cuda's byte counts
answered from cprr's. CI has no GPU: torch stand-ins."""

import types

import pytest

from conftest import FakeCprr

from cprr import _cprr
from cprr.rank import torch_allocator
from cprr.rank.case_setup import Rank


def fake_torch():
    memory = types.SimpleNamespace(memory_allocated=None, max_memory_allocated=None,
                                   reset_peak_memory_stats=None, memory_reserved=None)
    cuda = types.SimpleNamespace(memory=memory, memory_allocated=None, max_memory_allocated=None,
                                 reset_peak_memory_stats=None, memory_reserved=None)
    return types.SimpleNamespace(cuda=cuda)


def test_memory_counts_come_from_cprrs_allocator_under_both_names():
    torch, native = fake_torch(), FakeCprr()
    torch_allocator.memory_statistics(torch, native)
    native.allocated, native.peak = 4096, 8192
    for module in (torch.cuda, torch.cuda.memory):
        assert module.memory_allocated() == 4096
        assert module.memory_allocated(0) == 4096
        assert module.max_memory_allocated() == 8192
        assert module.memory_reserved() == 4096  # nothing is cached
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.memory.max_memory_allocated() == 4096
    # What torch does not have is not added.
    assert not hasattr(torch.cuda, "reset_max_memory_allocated")


def rank(backend):
    r = Rank([])
    r.backend = backend
    return r


@pytest.mark.parametrize("env", [{}, {"CPRR_TORCH_ALLOCATOR": "off"}])
def test_a_cpu_rank_or_an_allocator_switched_off_keeps_torchs(monkeypatch, env):
    swapped = []
    import torch

    monkeypatch.setattr(torch.cuda.memory, "change_current_allocator", swapped.append,
                        raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    torch_allocator.use_cprr_allocator(rank("cpu" if not env else "cuda"), _cprr)
    assert swapped == []


def test_cuda_without_pluggable_allocators_says_so_and_keeps_torchs(monkeypatch, capsys):
    import torch

    monkeypatch.delenv("CPRR_TORCH_ALLOCATOR", raising=False)
    monkeypatch.delenv("CPRR_OP_CAPTURE", raising=False)
    monkeypatch.delattr(torch.cuda.memory, "CUDAPluggableAllocator", raising=False)
    torch_allocator.use_cprr_allocator(rank("cuda"), _cprr)
    assert "has no CUDAPluggableAllocator" in capsys.readouterr().err

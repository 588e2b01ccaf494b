"""When a rank counts the CUDA work outside its op log (cprr.rank.unseen_work): once per cuda rank
process, never on cpu, never when CPRR_UNSEEN_WORK=off, and a rank whose CUPTI cannot start says
why on stderr and goes on without the count. The count itself is C++ (native/unseen_work.h,
tests/python/native); the compiled module is conftest's FakeCprr here."""

import types

from conftest import FakeCprr
from cprr.rank import unseen_work


def _rank():
    return types.SimpleNamespace(counter=None)


def test_a_cuda_rank_counts_once_with_the_module_as_its_counter(monkeypatch):
    monkeypatch.delenv("CPRR_UNSEEN_WORK", raising=False)
    rank, module = _rank(), FakeCprr()
    unseen_work.start_counter(rank, types.SimpleNamespace(backend="cuda"), module)
    assert rank.counter is module
    (call, libraries), = module.calls
    assert call == "start" and libraries[0] == "libcupti.so"  # the loader's path first
    unseen_work.start_counter(rank, types.SimpleNamespace(backend="cuda"), module)
    assert len(module.calls) == 1, "started once per rank process"


def test_a_cpu_rank_never_counts():
    rank, module = _rank(), FakeCprr()
    unseen_work.start_counter(rank, types.SimpleNamespace(backend="cpu"), module)
    assert rank.counter is None and module.calls == []


def test_switched_off_or_refused_the_rank_says_why_and_goes_on(monkeypatch, capsys):
    monkeypatch.setenv("CPRR_UNSEEN_WORK", "off")
    rank, module = _rank(), FakeCprr()
    unseen_work.start_counter(rank, types.SimpleNamespace(backend="cuda"), module)
    assert rank.counter is False and module.calls == []
    assert "not counted: CPRR_UNSEEN_WORK=off" in capsys.readouterr().err

    monkeypatch.delenv("CPRR_UNSEEN_WORK")
    rank, module = _rank(), FakeCprr(why="libcupti.so: cannot open shared object file")
    unseen_work.start_counter(rank, types.SimpleNamespace(backend="cuda"), module)
    assert rank.counter is False
    assert "not counted: libcupti.so: cannot open shared object file" in capsys.readouterr().err

"""cprr.rank.template's refusal to fork an unsafe template, and _op_capture.warm_up (what the
template runs once so that no rank pays torch's lazy imports in its first case)."""

import _thread
import threading
import time

import pytest
import torch

from cprr.capture import op_capture as _op_capture
from cprr.rank import template as _template


def test_a_template_without_other_threads_may_fork():
    _template._check_forkable()


def test_a_python_thread_from_a_case_files_import_refuses_the_fork_and_names_it():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="loader-prefetch", daemon=True)
    t.start()
    try:
        with pytest.raises(_template.TemplateError) as e:
            _template._check_forkable()
        assert "loader-prefetch" in str(e.value)
        assert "CPRR_PYTHON_TEMPLATE=off" in str(e.value)
    finally:
        stop.set()
        t.join()
    _template._check_forkable()  # the thread is gone: forking is fine again


def _threads_become(n):
    """Waits (a minute at most, else fails) until _thread counts `n` threads it started."""
    deadline = time.monotonic() + 60
    while _thread._count() != n:
        late = time.monotonic() > deadline  # why: the wait's deadline, a minute
        assert not late, f"{_thread._count()} threads, not {n}, after 60 s"
        time.sleep(0.001)  # why: the poll interval of a wait for a thread to start or end


def test_a_thread_running_no_python_code_does_not_refuse_the_fork():
    # As a native library's pool (numpy's OpenBLAS starts one per core when loaded): no Python
    # frame, its fork safety is the library's (pthread_atfork). The thread blocks in a C call
    # (acquiring a lock this test holds) until the test releases it: it exists while the check
    # runs.
    before = _thread._count()
    held = _thread.allocate_lock()
    held.acquire()
    _thread.start_new_thread(held.acquire, ())
    try:
        _threads_become(before + 1)
        _template._check_forkable()
        assert _thread._count() == before + 1  # still there: the check ran beside it
    finally:
        held.release()
        _threads_become(before)


def test_warm_up_runs_ops_under_a_dispatch_mode_and_touches_no_gpu():
    _op_capture.warm_up()
    if hasattr(torch.cuda, "is_initialized"):
        assert not torch.cuda.is_initialized()

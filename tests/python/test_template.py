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


def test_a_thread_running_no_python_code_does_not_refuse_the_fork():
    # As a native library's pool (numpy's OpenBLAS starts one per core when loaded): no Python
    # frame, its fork safety is the library's (pthread_atfork).
    _thread.start_new_thread(time.sleep, (0.5,))
    time.sleep(0.05)
    _template._check_forkable()
    time.sleep(0.6)


def test_warm_up_runs_ops_under_a_dispatch_mode_and_touches_no_gpu():
    _op_capture.warm_up()
    if hasattr(torch.cuda, "is_initialized"):
        assert not torch.cuda.is_initialized()

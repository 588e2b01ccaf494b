"""cprr.api.running: the case running on this thread, set for a block and cleared after it."""

import threading

import pytest

from conftest import FakeNative
from cprr.api import running as _running


def test_running_sets_and_clears_the_current_context_even_on_error():
    native, capture = FakeNative(), object()
    with pytest.raises(RuntimeError):
        with _running.running(native, capture):
            assert _running.current() is native
            assert _running.capture() is capture
            raise RuntimeError("case failed")
    assert _running.current() is None
    assert _running.capture() is None


def test_another_thread_sees_no_running_case():
    seen = []
    with _running.running(FakeNative()):
        t = threading.Thread(target=lambda: seen.append(_running.current()))
        t.start()
        t.join()
    assert seen == [None]


def test_only_the_outermost_call_is_the_cases():
    with _running.running(FakeNative()):
        assert not _running.in_call()
        with _running.call():
            assert _running.in_call()
        assert not _running.in_call()


def test_the_module_imports_neither_torch_nor_the_rest_of_cprr():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(_running))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names} | {n.module for n in ast.walk(tree)
                                     if isinstance(n, ast.ImportFrom)}
    assert imported == {"threading"}

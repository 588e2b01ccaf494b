"""cprr.capture.gpu_hooks.Forwarder: torch's CUDA trace callbacks as ordering ops of the running
case's op log, driven by hand (CI has no GPU to fire them)."""

import pytest
import torch

from conftest import FakeNative
from cprr.capture import gpu_hooks as _gpu_hooks
from cprr.capture import op_capture as _op_capture


def forwarder():
    native = FakeNative()
    capture = _op_capture.OpCapture(native, device_backend=True)
    current = {"capture": capture}
    return native, capture, current, _gpu_hooks.Forwarder(lambda: current["capture"])


def orders(native):
    return [(o["kind"], o["stream"], o["event"]) for o in native.log]


def test_events_waits_and_synchronizations_become_ordering_ops_on_numbered_streams():
    native, _, _, f = forwarder()
    f.event_record(0x10, 0x700)  # an event on a side stream
    f.event_wait(0x10, 0)  # the default stream waits for it
    f.stream_synchronization(0x700)
    f.event_synchronization(0x10)
    f.device_synchronization()
    assert orders(native) == [
        ("record", 1, 0),
        ("wait", 0, 0),
        ("sync", 1, -1),
        ("wait", -1, 0),  # the host waits for the event
        ("sync", -1, -1),
    ]


def test_a_destroyed_events_handle_names_a_new_event():
    native, _, _, f = forwarder()
    f.event_record(0x10, 0)
    f.event_deletion(0x10)
    f.event_record(0x10, 0)
    assert [e for _, _, e in orders(native)] == [0, 1]


def test_nothing_is_logged_inside_work_the_capture_logs_itself_or_without_a_case():
    native, capture, current, f = forwarder()
    with capture.in_op():  # a collective cprr models: its events are part of it
        f.event_record(0x10, 0)
        f.memory_allocation(0x1000)
    assert native.log == [] and capture.outside == {}
    current["capture"] = None  # no case on this thread
    f.event_record(0x10, 0)
    f.device_synchronization()
    assert native.log == []


def test_an_allocation_no_op_made_is_outside_the_op_log():
    _, capture, _, f = forwarder()
    f.memory_allocation(0x1000)
    capture.finish()
    assert capture.outside == {"allocation no op the dispatcher saw made": 1}


def test_without_a_gpu_nothing_is_installed():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the hooks would be installed for good")
    assert _gpu_hooks.install(lambda: None) is False
    assert not _gpu_hooks.available()

"""cprr.capture.stream_order: a case's streams and events as op-log numbers, and the orderings the
allocators make around memory (driven by hand: CI has no GPU)."""

from conftest import FakeNative
from cprr import _cprr
from cprr.capture import stream_order as _streams
from cprr.capture.tensor_table import Entry


def test_streams_and_events_are_numbered_as_they_appear():
    s = _streams.Streams()
    assert s.stream(0) == 0  # the legacy default stream
    assert [s.stream(0x700), s.stream(0x500), s.stream(0x700)] == [1, 2, 1]
    assert s.new_stream() == 3
    assert [s.event(0x10), s.event(0x20), s.event(0x10)] == [0, 1, 0]
    s.forget_event(0x10)  # destroyed: a new event may get its handle
    assert s.event(0x10) == 2
    assert s.new_event() == 3


def test_the_host_is_its_own_stream_and_cpu_work_runs_there():
    for host in (-1, 0):
        order = _streams.StreamOrder(FakeNative(), host)
        assert order.stream_of(None) == (host, 0)


def test_a_reuse_waits_for_each_use_in_stream_order():
    native = FakeNative()
    order = _streams.StreamOrder(native, -1)
    entry = Entry(buffer=1, stream=0)
    entry.used_on(0)  # its own stream: no use to wait for
    entry.used_on(3)
    entry.used_on(2)
    order.reuse_after_uses(entry)
    assert [(o["kind"], o["stream"], o["event"]) for o in native.log] == [
        ("record", 2, 0), ("wait", 0, 0), ("record", 3, 1), ("wait", 0, 1)]


def test_pinned_memory_is_waited_for_once_and_only_when_copies_used_it():
    native = FakeNative()
    order = _streams.StreamOrder(native, -1)
    key = ("cpu", None, 0x1000)
    assert not order.pinned_reused(key)
    order.pinned_used(key, 1)
    assert order.pinned_reused(key)
    assert not order.pinned_reused(key)
    assert [(o["kind"], o["stream"], o["event"]) for o in native.log] == [
        ("record", 1, 0), ("wait", -1, 0)]


def test_the_no_native_stream_value_is_the_runtimes():
    assert _streams.NO_NATIVE_STREAM == _cprr.NO_NATIVE_STREAM

"""The op capture in C++ (the `_cprr_torch` module: python/native/capture), with the surface of
cprr.capture.op_capture.OpCapture, which it replaces where the module was built for this torch.

The Python dispatch mode costs tens of microseconds per aten op (a Python call with its arguments
wrapped, then the capture's own Python). This capture takes the same ops from torch's
RecordFunction callbacks and applies the same rules in C++ (op_schema, tensor_table,
stream_order, outside), calling Python only to name an op's place in the case's code
(cprr.capture.where's rule) and for torch's symmetric windows. What the rest of cprr calls on a
capture (collectives, symmetric memory, the CUDA trace hooks) goes to the same C++ state.

CPRR_OP_CAPTURE=python keeps the Python mode (the fallback, and the reference the C++ capture is
compared with op for op: tests/python/test_native_capture.py).
"""

import os

from cprr.capture import graphs as _graphs
from cprr.capture import op_capture as _op_capture
from cprr.capture import where as _where

try:
    from cprr import _cprr_torch
except ImportError:  # not built for this torch (no headers at build time): the Python mode
    _cprr_torch = None

_PLANS = _cprr_torch.PlanCache() if _cprr_torch is not None else None


def available():
    """Whether the C++ capture is there and not turned off (CPRR_OP_CAPTURE=python)."""
    return _cprr_torch is not None and os.environ.get("CPRR_OP_CAPTURE") != "python"


class _Streams:
    """The case's stream and event numbers (cprr.capture.stream_order.Streams' surface), kept in
    C++."""

    def __init__(self, impl):
        self.stream = impl.stream
        self.event = impl.event
        self.forget_event = impl.forget_event
        self.new_stream = impl.new_stream
        self.new_event = impl.new_event


class _Block:
    """A re-entrant block of the C++ capture's: `enter` at its start, `leave` at its end."""

    def __init__(self, enter, leave):
        self._enter, self._leave = enter, leave

    def __enter__(self):
        self._enter()
        return self

    def __exit__(self, *exc):
        self._leave()
        return False


class NativeOpCapture(_graphs.GraphCalls):
    """cprr.capture.op_capture.OpCapture's surface over the C++ capture. `native`: the case's native
    context (the _cprr module's CaseContext, logged into directly) or any object with its
    methods (a test's fake: called through Python). `null_sink`: the ops go nowhere, in C++
    (tools/device/capture_profile.py's measure of the capture alone); `native` still gets what
    Python logs itself (note)."""

    def __init__(self, native, device_backend=False, counter=None, allocator=False,
                 symmetric=None, null_sink=False):
        from cprr import _cprr

        address, calls = 0, 0
        if isinstance(native, _cprr.CaseContext):  # logged into directly
            address, calls = native.address, _cprr.capture_calls()
        self._impl = _cprr_torch.Capture(
            native, address, calls, counter, _PLANS, device_backend, allocator,
            getattr(native, "device_index", -1), _where._inside, symmetric, null_sink)
        self._native = native
        self._running = None
        self.host = self._impl.host
        self.streams = _Streams(self._impl)
        self.outside = {}
        # torch's own work for something cprr logged (a collective)
        self._in_op = _Block(self._impl.enter_op, self._impl.leave_op)
        # cprr's own aten work (cprr.distributed.staging's copies): no ops of the case
        self._own = _Block(self._impl.enter_own, self._impl.leave_own)

    def __enter__(self):
        self._running = self._impl.run()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._running.stop()
        self._running = None
        if exc_type is None and self._impl.error:
            raise RuntimeError(self._impl.error)
        return False

    def touches(self, tensors):
        return self._impl.touches(list(tensors))

    def made_symmetric(self, t):
        self._impl.track_unwritten(t, f"symm_mem.empty{tuple(t.shape)} at {_where.caller()}")

    def became_symmetric(self, t, place):
        self._impl.registered(t, place)

    def adopt(self, tensor, buffer):
        self._impl.adopt(tensor, buffer)

    def stream_of(self, device):
        if device is None or device.type != "cuda":
            return self._impl.stream_of(-1)
        index = device.index
        if index is None:
            import torch

            index = torch.cuda.current_device()
        return self._impl.stream_of(index)

    def note(self, what, reads=(), writes=(), stream=None, uses=()):
        """cprr.capture.op_capture.OpCapture.note."""
        return _op_capture.note(self, self._native, what, reads, writes, stream, uses)

    def synchronize(self):
        """cprr.capture.op_capture.OpCapture.synchronize."""
        self._native.synchronize_library()

    def hold_probe(self, held):
        """cprr.capture.op_capture.OpCapture.hold_probe."""
        (self._native.hold_probe if held else self._native.release_probe)()

    def used_by(self, tensors, stream):
        self._impl.used_by(list(tensors), stream)

    def order(self, kind, what, stream, event=-1):
        self._impl.order(kind, what, stream, event)

    def count_outside(self, what):
        self._impl.count_outside(what)

    def finish(self):
        self._impl.finish()
        self.outside.update(self._impl.outside_counts())

    def in_op(self):
        return self._in_op

    def own_work(self):
        return self._own

    @property
    def inside_op(self):
        return self._impl.inside_op

    def freed(self, device_index, address):
        self._impl.freed(device_index, address)

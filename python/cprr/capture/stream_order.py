"""Where a case's work runs (its CUDA streams and the host, as op-log numbers) and the orderings
torch makes between them around memory, as torch's CUDA sanitizer's StreamSynchronizations does.

Events, stream waits and synchronizations the case asks for come from torch's CUDA trace hooks
(cprr.capture.gpu_hooks). The orderings here are the allocators' own, which no hook reports: the
caching allocator hands memory freed on a stream back out only after the streams record_stream
named, and torch's host allocator hands pinned memory back out only after the non_blocking copies
that used it.
"""

import torch

from cprr.capture.tensor_table import key_of

# _cprr.NO_NATIVE_STREAM: a stream the capture models with no cudaStream_t behind it. Written
# here, not imported: the capture imports without the compiled module (tools/device's profile and
# the unit tests that drive it on fakes); tests/python/test_streams.py checks the two agree.
NO_NATIVE_STREAM = (1 << 64) - 1


def native_stream(stream):
    """The cudaStream_t of a torch stream argument (a torch.cuda.Stream, or the device-generic
    torch.Stream an aten op receives in torch 2.x)."""
    handle = getattr(stream, "cuda_stream", None)
    if handle is not None:
        return handle
    return torch.cuda.Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                             device_type=stream.device_type).cuda_stream


def _current_raw_stream(index):
    """The cudaStream_t of the device's current stream (without making a Stream object)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(index)
    return torch.cuda.current_stream(index).cuda_stream


class Streams:
    """One case's CUDA streams and events as op-log numbers: stream 0 is the legacy default
    stream (handle 0), others are numbered as they first appear; events likewise from 0. Numbers
    no handle has (new_stream, new_event) are for orderings cprr models itself."""

    def __init__(self):
        self._streams = {0: 0}
        self._events = {}
        self._next_stream = 1
        self._next_event = 0

    def stream(self, handle):
        number = self._streams.get(handle)
        if number is None:
            number = self._streams[handle] = self.new_stream()
        return number

    def new_stream(self):
        self._next_stream += 1
        return self._next_stream - 1

    def event(self, handle):
        number = self._events.get(handle)
        if number is None:
            number = self._events[handle] = self.new_event()
        return number

    def forget_event(self, handle):
        """The event was destroyed: a new one may get its handle, and is another event."""
        self._events.pop(handle, None)

    def new_event(self):
        self._next_event += 1
        return self._next_event - 1


class StreamOrder:
    """The case's streams (`numbers`, a Streams) and host (`host`: -1 on a device backend, where
    CPU tensors are written by the host thread; 0 on the cpu backend, where every op runs on the
    host in order), and the orderings logged into `native` (the case's native context)."""

    def __init__(self, native, host):
        self._native = native
        self.host = host
        self.numbers = Streams()
        self._pinned_uses = {}  # pinned host memory -> events of the non_blocking copies using it

    def stream_of(self, device):
        """(op-log stream, cudaStream_t) where an op on `device` runs: the device's current
        stream, or the host for None and CPU."""
        if device is None or device.type != "cuda":
            return self.host, 0
        handle = _current_raw_stream(device.index)
        return self.numbers.stream(handle), handle

    def order(self, kind, what, stream, event=-1):
        """An ordering op (record, wait, sync) in the op log."""
        self._native.library_order(kind, what, stream, event)

    def reuse_after_uses(self, entry):
        """`entry`'s memory (cprr.capture.tensor_table.Entry) was freed: the streams record_stream
        named must finish before it is reused. Logged as the allocating stream waiting for each of
        them, which is how the allocator orders it (it hands the memory only to that stream, once
        their events completed)."""
        for use in sorted(entry.uses):
            event = self.numbers.new_event()
            self.order("record", "record_stream: a use the allocator waits for", use, event)
            self.order("wait", "memory reused after its record_stream uses", entry.stream, event)

    def pinned_in_use(self, tensors, stream):
        """A non_blocking copy on `stream` reads or writes pinned host memory: torch's host
        allocator records an event on the stream and hands the memory out again only once it
        completed."""
        for t in tensors:
            if t.device.type == "cpu" and t.is_pinned():
                self.pinned_used(key_of(t), stream)

    def pinned_used(self, key, stream):
        """A non_blocking copy on `stream` uses the pinned host memory at `key`."""
        event = self.numbers.new_event()
        self.order("record", "pinned memory used by a non_blocking copy", stream, event)
        self._pinned_uses.setdefault(key, []).append(event)

    def pinned_reused(self, key):
        """Host memory at `key` is handed out again: if non_blocking copies used it (pinned), the
        host waits for them first. Returns whether it did."""
        events = self._pinned_uses.pop(key, None)
        for event in events or ():
            self.order("wait", "pinned memory reused once its copies are done", -1, event)
        return bool(events)

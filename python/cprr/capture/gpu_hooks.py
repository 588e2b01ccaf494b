"""torch's CUDA trace hooks, turned into ordering ops of the running case's op log.

torch 2.x calls these from C++ whenever a CUDA event is recorded or waited for, a stream, event or
the device is synchronized, and the caching allocator hands out or takes back memory: also when
torch itself does it (ProcessGroupNCCL's events, ``.item()``'s stream sync). Once activated they
cannot be turned off, so they are registered once per process and forward to the case running on
the calling thread; what another thread does (NCCL's watchdog freeing a tensor) is not the case
body's and is dropped.

What arrives while cprr runs work it logs itself (inside a collective it models, see
OpCapture.in_op) belongs to that work and is not logged again. Memory handed out outside every
op the dispatcher saw (a custom extension's own allocation) is counted as outside the op log.
"""

import torch

# The callbacks, by what they report: (torch 2.1+ name, torch 2.0 name).
_NAMES = {
    "event_record": ("register_callback_for_event_record", "register_callback_for_cuda_event_record"),
    "event_wait": ("register_callback_for_event_wait", "register_callback_for_cuda_event_wait"),
    "event_deletion": ("register_callback_for_event_deletion",
                       "register_callback_for_cuda_event_deletion"),
    "event_synchronization": ("register_callback_for_event_synchronization",
                              "register_callback_for_cuda_event_synchronization"),
    "stream_synchronization": ("register_callback_for_stream_synchronization",
                               "register_callback_for_cuda_stream_synchronization"),
    "device_synchronization": ("register_callback_for_device_synchronization",
                               "register_callback_for_cuda_device_synchronization"),
    "memory_allocation": ("register_callback_for_memory_allocation",
                          "register_callback_for_cuda_memory_allocation"),
    "memory_deallocation": ("register_callback_for_memory_deallocation",
                            "register_callback_for_cuda_memory_deallocation"),
}


def _trace_module():
    try:
        from torch.cuda import _gpu_trace

        return _gpu_trace
    except ImportError:
        try:
            from torch.utils import _cuda_trace

            return _cuda_trace
        except ImportError:
            return None


def available():
    """Whether this torch has CUDA trace hooks and a GPU to fire them."""
    return torch.cuda.is_available() and _trace_module() is not None


class Forwarder:
    """The callbacks: each asks `current()` for the running capture
    (cprr.capture.op_capture.OpCapture) of the calling thread, and does nothing without one."""

    def __init__(self, current):
        self._current = current

    def _capture(self):
        capture = self._current()
        if capture is None or capture.inside_op:
            return None
        return capture

    def event_record(self, event, stream):
        c = self._capture()
        if c is not None:
            c.order("record", "torch event record", c.streams.stream(stream), c.streams.event(event))

    def event_wait(self, event, stream):
        c = self._capture()
        if c is not None:
            c.order("wait", "torch stream waits for event", c.streams.stream(stream),
                    c.streams.event(event))

    def event_deletion(self, event):
        c = self._current()
        if c is not None:
            c.streams.forget_event(event)

    def event_synchronization(self, event):
        c = self._capture()
        if c is not None:
            c.order("wait", "host waits for event (event.synchronize)", -1, c.streams.event(event))

    def stream_synchronization(self, stream):
        c = self._capture()
        if c is not None:
            c.order("sync", "host waits for stream (stream.synchronize)", c.streams.stream(stream))

    def device_synchronization(self):
        c = self._capture()
        if c is not None:
            c.order("sync", "host waits for the device (torch.cuda.synchronize)", -1)

    def memory_allocation(self, address):
        c = self._capture()
        if c is not None:
            c.count_outside("allocation no op the dispatcher saw made")

    def memory_deallocation(self, address):
        c = self._current()
        if c is not None:
            c.freed(torch.cuda.current_device(), address)


def install(current):
    """Registers the forwarding callbacks and turns the hooks on; once per process, on the cuda
    backend. Returns False where this torch has none (1.13, or no GPU)."""
    module = _trace_module()
    if module is None or not torch.cuda.is_available():
        return False
    forwarder = Forwarder(current)
    for what, names in _NAMES.items():
        register = next((getattr(module, n) for n in names if hasattr(module, n)), None)
        if register is not None:
            register(getattr(forwarder, what))
    activate = getattr(torch._C, "_activate_gpu_trace", None) or getattr(
        torch._C, "_activate_cuda_trace", None)
    if activate is None:
        return False
    activate()
    return True

"""CUDA graphs in a case's op log (torch.cuda.CUDAGraph: torch.cuda.graph, make_graphed_callables,
torch.compile's cudagraphs).

The kernels a stream capture enqueues do not run when their ops are issued but at each replay of
the graph, on the stream current at the replay. The op capture still sees each op as it is
captured; these wrappers tell the case's native context where a capture begins and ends, so the
ops between are held as the graph's (recorder/api/library_graphs.h), and where each replay
launches the graph, so its ops are logged again there. A replay is work cprr logged: the CUDA
graph launch it makes is not counted as outside the op log.

A graph captured outside the running case (at import, or in an earlier case of a pooled rank) has
no ops in this case's log: its replays are counted as outside the op log.
"""

import weakref

import torch

_MARK = "_cprr_graph"  # on a graph: (weakref to the capture that saw it made, its number there)


def _current_stream():
    return torch.cuda.current_stream().cuda_stream


def begin(capture, native):
    """A capture began on the current stream (the graph's capture stream)."""
    native.graph_begin(capture.streams.stream(_current_stream()))


def end(capture, native, graph):
    """The capture on the current stream ended: `graph` is the running case's."""
    number = native.graph_end(capture.streams.stream(_current_stream()))
    setattr(graph, _MARK, (weakref.ref(capture), number))


def replay(capture, native, graph, launch):
    """`launch()` replays `graph` on the current stream: its ops are logged there first (a
    replay's delays are enqueued before it), and the host synchronizes after it when a replay
    asks. A graph made outside this case is counted as outside the op log."""
    made = getattr(graph, _MARK, None)
    if made is None or made[0]() is not capture:
        capture.count_outside("CUDA graph replays of a graph captured outside the case")
        return launch()
    handle = _current_stream()
    op = native.graph_launch(made[1], capture.streams.stream(handle), handle)
    with capture.in_op():
        result = launch()
        if op is not None and op[1]:
            capture.synchronize()
    return result


class GraphCalls:
    """What both op captures (cprr.capture.op_capture, cprr.capture.native_capture) answer the
    wrappers below with; each has `streams`, `_native`, `in_op`, `synchronize` and
    `count_outside`."""

    def graph_begin(self):
        """A graph capture began on the current stream: its ops are the graph's."""
        begin(self, self._native)

    def graph_end(self, graph):
        """The capture ended: `graph` is this case's."""
        end(self, self._native, graph)

    def graph_replay(self, graph, launch):
        """`launch()` replays `graph` on the current stream; returns what it returns."""
        return replay(self, self._native, graph, launch)


def install(current, cls=None):
    """Wraps capture_begin, capture_end and replay of `cls` (torch.cuda.CUDAGraph), once per
    process; each forwards to the capture `current()` returns (none: torch's own call alone)."""
    cls = cls if cls is not None else getattr(torch.cuda, "CUDAGraph", None)
    if cls is None or cls.__dict__.get("_cprr_wrapped", False):
        return
    capture_begin, capture_end, launch = cls.capture_begin, cls.capture_end, cls.replay

    def wrapped_begin(self, *args, **kwargs):
        capture_begin(self, *args, **kwargs)
        c = current()
        if c is not None:
            c.graph_begin()

    def wrapped_end(self):
        c = current()
        try:
            capture_end(self)
        finally:
            # Even a capture that failed has ended: what follows runs as it is issued.
            if c is not None:
                c.graph_end(self)

    def wrapped_replay(self):
        c = current()
        if c is None:
            return launch(self)
        return c.graph_replay(self, lambda: launch(self))

    cls.capture_begin, cls.capture_end, cls.replay = wrapped_begin, wrapped_end, wrapped_replay
    cls._cprr_wrapped = True

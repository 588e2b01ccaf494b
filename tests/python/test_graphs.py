"""cprr.capture.graphs: torch.cuda.CUDAGraph's capture and replay forwarded to the running case's
native context (recorder/api/library_graphs.h holds the captured ops and logs them at each
launch), driven by hand with a stand-in graph class (CI has no GPU to capture on). Both op
captures (the Python mode and the C++ one, where built) forward alike."""

import pytest

from conftest import FakeNative
from cprr.capture import graphs as _graphs
from cprr.capture import native_capture as _native_capture
from cprr.capture import op_capture as _op_capture

CAPTURES = [_op_capture.OpCapture]
if _native_capture.available():
    CAPTURES.append(_native_capture.NativeOpCapture)


class StandInGraph:
    """torch.cuda.CUDAGraph's three calls, recording what torch would have done."""

    def __init__(self, calls, fail_end=False):
        self.calls, self.fail_end = calls, fail_end

    def capture_begin(self, *args, **kwargs):
        self.calls.append("torch capture_begin")

    def capture_end(self):
        self.calls.append("torch capture_end")
        if self.fail_end:
            raise RuntimeError("operation not permitted when stream is capturing")

    def replay(self):
        self.calls.append("torch replay")
        return "launched"


@pytest.fixture
def graphs(monkeypatch):
    """(native, capture, the stand-in class wrapped, a dict setting the current stream)."""

    def make(capture_class):
        native = FakeNative(backend="cuda", device_index=0)
        capture = capture_class(native, device_backend=True)
        stream = {"handle": 0x700}
        monkeypatch.setattr(_graphs, "_current_stream", lambda: stream["handle"])
        cls = type("Graph", (StandInGraph,), {})
        current = {"capture": capture}
        _graphs.install(lambda: current["capture"], cls)
        return native, capture, cls, stream, current

    return make


@pytest.mark.parametrize("capture_class", CAPTURES)
def test_a_capture_and_its_replays_reach_the_native_context_on_their_streams(graphs,
                                                                          capture_class):
    native, capture, cls, stream, _ = graphs(capture_class)
    calls = []
    g = cls(calls)
    with capture:
        g.capture_begin()
        g.capture_end()
        stream["handle"] = 0  # replayed on the default stream, then on the capture stream
        assert g.replay() == "launched"
        stream["handle"] = 0x700
        g.replay()
        capture.finish()
    side = capture.streams.stream(0x700)
    assert side != 0
    assert native.graph_calls == [("begin", side), ("end", side), ("launch", 0, 0, 0),
                                  ("launch", 0, side, 0x700)]
    # torch's own calls, in their order, each after cprr's launch record
    assert calls == ["torch capture_begin", "torch capture_end", "torch replay", "torch replay"]
    assert capture.outside == {}  # a replay of the case's graph is in the op log
    assert native.syncs == []


@pytest.mark.parametrize("capture_class", CAPTURES)
def test_a_replay_syncs_when_the_replay_asks_and_a_failed_capture_still_ends(graphs,
                                                                         capture_class):
    native, capture, cls, _, _ = graphs(capture_class)
    native.graph_sync = True
    broken = cls([], fail_end=True)
    with capture:
        broken.capture_begin()
        with pytest.raises(RuntimeError, match="capturing"):
            broken.capture_end()
        g = cls([])
        g.capture_begin()
        g.capture_end()
        g.replay()
        capture.finish()
    assert [c[0] for c in native.graph_calls] == ["begin", "end", "begin", "end", "launch"]
    assert native.graph_calls[-1][1] == 1  # the second graph
    assert native.syncs == [len(native.log)]


@pytest.mark.parametrize("capture_class", CAPTURES)
def test_a_graph_made_outside_the_case_replays_as_work_outside_the_op_log(graphs, capture_class):
    native, capture, cls, _, current = graphs(capture_class)
    current["capture"] = None  # no case running: torch's calls alone
    g = cls([])
    g.capture_begin()
    g.capture_end()
    assert native.graph_calls == []
    current["capture"] = capture
    with capture:
        g.replay()
        capture.finish()
    assert native.graph_calls == []
    assert capture.outside == {"CUDA graph replays of a graph captured outside the case": 1}


def test_wrapping_twice_wraps_once():
    cls = type("Graph", (StandInGraph,), {})
    _graphs.install(lambda: None, cls)
    wrapped = cls.replay
    _graphs.install(lambda: None, cls)
    assert cls.replay is wrapped

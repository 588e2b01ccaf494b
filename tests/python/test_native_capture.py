"""The C++ op capture (cprr.capture.native_capture, python/native/capture) against the Python
dispatch mode (cprr.capture.op_capture): the same case bodies under each log the same calls, call
for call, into conftest's FakeNative (addresses aside: two runs place their tensors apart); and
the Python mode's black-box tests (test_op_capture.py) pass with it.

Skipped where the module was not built (no torch headers at build time: Debian libtorch-dev).
"""

import pytest
import torch

import test_op_capture as base
from conftest import FakeNative
from cprr.capture import native_capture as _native_capture
from cprr.capture import op_capture as _op_capture

pytestmark = pytest.mark.skipif(_native_capture._cprr_torch is None,
                                reason="_cprr_torch was not built (no torch headers)")


@pytest.fixture(autouse=True)
def native_capture(monkeypatch):
    """test_op_capture's make() gives the C++ capture."""
    monkeypatch.setattr(base, "CAPTURE", _native_capture.NativeOpCapture)


# test_op_capture's tests of what a capture logs (not of the Python mode's own objects), run
# here with the C++ capture.
for _name in (
        "test_every_tensor_an_op_makes_is_tracked_in_order_and_written_by_it",
        "test_empty_then_accumulate_reads_the_whole_span",
        "test_partial_write_then_whole_read_spans",
        "test_reading_through_a_view_reads_only_its_span",
        "test_a_strided_view_reads_each_of_its_contiguous_runs",
        "test_a_view_of_more_runs_than_the_cap_reads_its_whole_extent",
        "test_out_argument_is_written_not_read",
        "test_overwriting_inplace_ops_write_without_reading_the_target",
        "test_arithmetic_inplace_reads_its_target",
        "test_views_log_nothing_by_themselves",
        "test_new_empty_and_empty_like_track_the_new_tensor_without_reading_the_source",
        "test_metadata_queries_read_no_bytes",
        "test_cprrs_own_work_is_no_op_of_the_case",
        "test_copies_of_contiguous_tensors_only_move_bytes_and_other_ops_do_not",
        "test_a_copy_that_is_not_its_reads_laid_end_to_end_is_a_plain_read",
        "test_empty_strided_spans_from_first_to_last_element",
        "test_an_op_returning_several_tensors_tracks_each",
        "test_on_the_cpu_backend_every_op_is_on_stream_0",
        "test_on_a_device_backend_cpu_tensors_are_the_hosts",
        "test_a_freed_address_made_anew_is_another_buffer",
        "test_host_memory_an_async_call_used_is_reused_after_the_call",
        "test_note_logs_the_tensors_it_touches_on_their_stream",
        "test_note_ignores_empty_tensors",
        "test_adopt_logs_ops_against_the_given_allocation",
):
    globals()[_name] = getattr(base, _name)


# ---- call for call against the Python mode -------------------------------------------------


def _views_and_inplace():
    a = torch.empty(4, 6)
    a.fill_(2.0)
    a[:, 1:3].mul_(3)
    a.t()[0].add_(1)
    b = a.view(24)[::5].clone()
    torch.add(a, 1, out=a)
    return b.sum().item()


def _factories_and_copies():
    x = torch.tensor([1.0, 2.0, 3.0])
    y = torch.zeros_like(x)
    y.copy_(x)
    z = x.to(torch.float64)
    w = torch.cat([x, y, z.float()])
    e = torch.empty_strided((2, 3), (1, 2))
    e.zero_()
    n = x.new_empty(5)
    n[:3] = x
    return w, e, n


def _nn_and_autograd():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.LayerNorm(4))
    x = torch.randn(3, 8, requires_grad=True)
    out = model(x)
    out.sum().backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
    return x.grad


def _reductions_and_indexing():
    x = torch.arange(12.0).reshape(3, 4)
    values, indices = x.max(dim=1)
    top = torch.topk(x, 2)
    x.index_put_((torch.tensor([0, 2]),), torch.tensor(-1.0))
    x.masked_fill_(x > 5, 0.0)
    s = torch.stack([x, x]).mean(0)
    m = x @ x.t()
    return values, indices, top, s, m, bool(torch.equal(x, x)), x.is_contiguous()


def _detached_and_inference():
    x = torch.ones(3, requires_grad=True)
    d = x.detach()
    d2 = (x * 2).detach_()
    with torch.inference_mode():
        y = torch.ones(3) * 4
    return d + d2 + y


@torch.jit.script
def _backward(loss: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    loss.backward(grad)
    return loss


@torch.jit.script
def _backward_on_a_worker(loss: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    return torch.jit.wait(torch.jit.fork(_backward, loss, grad))


def _backward_on_another_thread():
    # A CUDA backward runs its nodes on autograd's device thread, with the case's thread-local
    # state; on cpu a backward forked by TorchScript runs them on another thread of torch's the
    # same way (its gradient made here, as torch.autograd.backward makes it in the caller).
    # The engine works between nodes there too: a broadcast input's gradient summed to its shape
    # (validate_outputs) and the gradients of a tensor used twice added (its input buffer).
    w = torch.ones(4, requires_grad=True)
    x = torch.arange(4.0)
    rows = torch.arange(12.0).reshape(3, 4)
    loss = (w * x).sum() + ((w + rows) * rows).sum()
    _backward_on_a_worker(loss, torch.ones_like(loss))
    return w.grad


_BODIES = [_views_and_inplace, _factories_and_copies, _nn_and_autograd,
           _reductions_and_indexing, _detached_and_inference, _backward_on_another_thread]


def _calls(capture_kind, body):
    """What `body` under a `capture_kind` told the native side, addresses left out (where the
    allocator puts a tensor differs from run to run)."""
    native = FakeNative()
    capture = capture_kind(native)
    with capture:
        body()
    capture.finish()
    tracks = [t._replace(address=None) for t in native.tracks]
    log = [dict(o, reads=[tuple(r) for r in o["reads"]], writes=[tuple(w) for w in o["writes"]])
           for o in native.log]
    return log, tracks, native.freed, capture.outside


@pytest.mark.parametrize("body", _BODIES, ids=[b.__name__.strip("_") for b in _BODIES])
def test_a_body_logs_the_same_calls_under_either_capture(body):
    python = _calls(_op_capture.OpCapture, body)
    native = _calls(_native_capture.NativeOpCapture, body)
    for part, p, n in zip(("log", "tracks", "freed", "outside"), python, native):
        assert n == p, part
    assert python[0], "the body logged nothing: the comparison tested nothing"


def test_an_op_the_capture_fails_on_fails_the_case_once_the_body_returns():
    class Broken(FakeNative):
        def library_op(self, *args, **kwargs):
            raise ValueError("the native side broke")

    capture = _native_capture.NativeOpCapture(Broken())
    with pytest.raises(RuntimeError, match="the native side broke"):
        with capture:
            torch.ones(3).sum()


def test_the_capture_stops_with_its_block():
    native = FakeNative()
    with _native_capture.NativeOpCapture(native):
        torch.ones(2)
    logged = len(native.log)
    torch.ones(2)
    assert logged > 0 and len(native.log) == logged
    with _native_capture.NativeOpCapture(FakeNative()):  # and another can start after it
        pass


def test_python_in_the_environment_keeps_the_python_mode(monkeypatch):
    monkeypatch.setenv("CPRR_OP_CAPTURE", "python")
    assert not _native_capture.available()
    monkeypatch.delenv("CPRR_OP_CAPTURE")
    assert _native_capture.available()


def test_the_stub_names_what_the_module_has():
    import ast
    import os

    from cprr import _cprr_torch

    stub = ast.parse(open(os.path.join(os.path.dirname(_cprr_torch.__file__),
                                       "_cprr_torch.pyi")).read())
    classes = {n.name: {m.name for m in n.body if isinstance(m, ast.FunctionDef)}
               for n in stub.body if isinstance(n, ast.ClassDef)}
    assert set(classes) == {n for n in dir(_cprr_torch) if not n.startswith("_")}
    for name, members in classes.items():
        public = {n for n in dir(getattr(_cprr_torch, name)) if not n.startswith("_")}
        assert members - {"__init__"} == public, name


# ---- kernels seen only as launches (CPRR_LAUNCH_CAPTURE: proven on the GPU machine only) -----


def test_a_launchs_parameters_are_laid_out_by_the_drivers_layout():
    from cprr import _cprr_torch

    ptr, n = (0x7F00_0000_1000).to_bytes(8, "little"), (5).to_bytes(4, "little")
    layout, values = _cprr_torch._kernel_args([ptr, n, ptr], None, [(0, 8), (8, 4), (16, 8)])
    assert layout == [(0, 8), (8, 4), (16, 8)]
    assert values == ptr + n + bytes(4) + ptr, "a gap between parameters is zero"
    assert _cprr_torch._kernel_args([ptr], None, None) is None, "no layout: sizes unknown"


def test_a_packed_buffer_is_taken_as_it_is_with_or_without_a_layout():
    from cprr import _cprr_torch

    packed = bytes(range(24))
    assert _cprr_torch._kernel_args(None, packed, None) == ([(0, 24)], packed)
    layout, values = _cprr_torch._kernel_args(None, packed, [(0, 8), (8, 8), (16, 16)])
    assert layout == [(0, 8), (8, 8)], "a parameter past the buffer is left out"
    assert values == packed
    assert _cprr_torch._kernel_args(None, None, [(0, 8)]) is None


def test_the_launch_capture_is_on_unless_turned_off(monkeypatch):
    from cprr import _cprr_torch

    monkeypatch.delenv("CPRR_LAUNCH_CAPTURE", raising=False)
    assert _cprr_torch._launch_capture_on()
    monkeypatch.setenv("CPRR_LAUNCH_CAPTURE", "1")
    assert _cprr_torch._launch_capture_on()
    monkeypatch.setenv("CPRR_LAUNCH_CAPTURE", "0")
    assert not _cprr_torch._launch_capture_on()


def test_a_kernels_name_is_demangled_when_it_is_a_cpp_name():
    from cprr import _cprr_torch

    assert _cprr_torch._kernel_name("_Z5scalePfi") == "scale(float*, int)"
    assert _cprr_torch._kernel_name("triton_poi_fused_add_0") == "triton_poi_fused_add_0"
    assert _cprr_torch._kernel_name("") == "kernel"

"""cprr.accesses: a call the dispatcher does not see, declared with the tensors it reads, writes
and is handed without knowing how (uses). Under either capture it is one op of the log with
those tensors' bytes (uses as accesses of unknown direction), beside the block's own dispatcher
ops; outside a case it only runs its body. End to end on cpu: memory written past the
dispatcher reads as never written unless the call that wrote it is declared."""

import json
import textwrap

import pytest
import torch

import cprr
from conftest import FakeNative, record_python
from cprr.api import running as _running
from cprr.capture import native_capture as _native_capture
from cprr.capture import op_capture as _op_capture

CAPTURES = [_op_capture.OpCapture]
if _native_capture.available():
    CAPTURES.append(_native_capture.NativeOpCapture)


def _logged(capture_kind, body):
    native = FakeNative()
    capture = capture_kind(native)
    with _running.running(native, capture), capture:
        body()
    capture.finish()
    return native


@pytest.mark.parametrize("capture_kind", CAPTURES, ids=lambda k: k.__name__)
def test_a_declared_call_is_one_op_with_the_bytes_of_its_tensors(capture_kind):
    a, b, w = torch.ones(8), torch.empty(4), torch.ones(2, dtype=torch.float64)

    def body():
        with cprr.accesses("ext_scale", reads=[a[4:]], writes=[b], uses=[w]):
            b.mul_(0)  # the block's own dispatcher op, logged as ever

    native = _logged(capture_kind, body)
    declared = [o for o in native.log if o["name"].startswith("ext_scale at ")]
    assert len(declared) == 1, native.log
    op = declared[0]
    assert op["name"].split(" at ")[1].startswith("test_declared.py:"), op["name"]
    buffers = {t.address: i + 1 for i, t in enumerate(native.tracks)}
    assert op["reads"] == [(buffers[a.data_ptr()], 16, 16)], op
    assert op["writes"] == [(buffers[b.data_ptr()], 0, 16)], op
    assert op["touches"] == [(buffers[w.data_ptr()], 0, 16)], op
    after = native.log[native.log.index(op) + 1:]
    assert any(o["name"].startswith("aten.mul_") for o in after), native.log


class _SyncsAfterDeclared(FakeNative):
    """A replay whose sync bisection syncs after every declared call."""

    def library_op(self, kind, name, *args, **kwargs):
        seq, _ = super().library_op(kind, name, *args, **kwargs)
        return seq, name.startswith("ext_fill at ")


@pytest.mark.parametrize("capture_kind", CAPTURES, ids=lambda k: k.__name__)
def test_a_replay_syncs_after_the_declared_block_it_names_once_its_work_is_issued(capture_kind):
    """The sync bisection's sync after a declared call comes when the block ends: a sync when
    the op is logged (before the call issues its kernels) would order nothing."""
    a, b = torch.ones(4), torch.empty(4)
    native = _SyncsAfterDeclared()
    capture = capture_kind(native)
    ends = []
    with _running.running(native, capture), capture:
        for _ in range(2):
            with cprr.accesses("ext_fill", writes=[b], reads=[a]):
                syncs = len(native.syncs)
                b.mul_(0)
                assert len(native.syncs) == syncs, "no sync inside the block"
            ends.append(len(native.log))
    capture.finish()
    names = [o["name"].split(" at ")[0] for o in native.log]
    assert names.count("ext_fill") == 2, names
    assert native.syncs == ends, "once each block's own op was issued: " + repr(native.syncs)


@pytest.mark.parametrize("capture_kind", CAPTURES, ids=lambda k: k.__name__)
def test_a_declared_function_logs_the_arguments_it_names_at_each_call(capture_kind):
    def ext_add(a, b, out=None, parts=()):
        return out.copy_(a + b)

    add = cprr.declared(reads=(0, 1, "parts"), writes=("out",))(ext_add)
    a, b, out, p = torch.ones(4), torch.ones(4), torch.empty(4), torch.ones(2)

    def body():
        add(a, b, out=out, parts=[p])
        add(a, b, out=out)

    native = _logged(capture_kind, body)
    calls = [o for o in native.log if o["name"].startswith("ext_add at test_declared.py:")]
    assert len(calls) == 2, native.log
    buffers = {t.address: i + 1 for i, t in enumerate(native.tracks)}
    assert calls[0]["reads"] == [(buffers[t.data_ptr()], 0, t.numel() * 4) for t in (a, b, p)]
    assert calls[1]["reads"] == [(buffers[t.data_ptr()], 0, 16) for t in (a, b)]
    assert calls[0]["writes"] == calls[1]["writes"] == [(buffers[out.data_ptr()], 0, 16)]
    assert add.__wrapped__ is ext_add and add.__name__ == "ext_add"
    with pytest.raises(TypeError, match="names no argument"):
        cprr.declared(reads=(1.5,))(ext_add)(a, b, out=out)


def test_outside_a_case_the_block_only_runs_its_body():
    ran = []
    with cprr.accesses("ext", reads=[torch.ones(1)], writes=["not checked either"]):
        ran.append(True)
    assert ran == [True]


@pytest.mark.parametrize("capture_kind", CAPTURES, ids=lambda k: k.__name__)
def test_something_other_than_a_tensor_is_refused_naming_the_call(capture_kind):
    def body():
        with cprr.accesses("ext", writes=[torch.ones(1).data_ptr()]):
            pass

    with pytest.raises(TypeError, match=r"cprr.accesses\('ext'\): writes takes torch.Tensors"):
        _logged(capture_kind, body)


CASES = textwrap.dedent('''
    import ctypes
    import torch
    import cprr

    def _filled_past_the_dispatcher(ctx, declared):
        buf = torch.empty(64)
        fill = lambda: ctypes.memset(buf.data_ptr(), 0, 64 * 4)   # an extension's own write
        if declared:
            with cprr.accesses("ext_zero", writes=[buf]):
                fill()
        else:
            fill()
        ctx.output("sum", buf.sum().reshape(1))

    @cprr.case(name="healthy/declared_fill", world_sizes=[2])
    def declared_fill(ctx):
        _filled_past_the_dispatcher(ctx, declared=True)

    @cprr.case(name="bug/undeclared_fill", world_sizes=[2], seeded_bug="uninitialized_read")
    def undeclared_fill(ctx):
        _filled_past_the_dispatcher(ctx, declared=False)
''')


def test_a_declared_write_past_the_dispatcher_is_a_write_and_an_undeclared_one_is_not(tmp_path):
    (tmp_path / "test_declared_cases.py").write_text(CASES)
    run = record_python(tmp_path, "--mode", "fresh", "--db", tmp_path / "run.db", "--json")
    cases = {c["label"]: c for c in json.loads(run.stdout)["cases"]}
    assert cases["healthy/declared_fill@2"]["verdict"] is None, run.stdout[-3000:]
    assert cases["healthy/declared_fill@2"]["as_expected"], run.stdout[-3000:]
    read = cases["bug/undeclared_fill@2"]["uninitialized_read"]
    assert read is not None and "aten.sum" in read["name"], run.stdout[-3000:]


@pytest.mark.parametrize("capture_kind", CAPTURES, ids=lambda k: k.__name__)
def test_a_block_handed_uses_holds_a_probe_replays_probe_until_it_ends(capture_kind):
    """A probe replay compares what a declared call was handed once its block ends: the block's
    own dispatcher op (logged inside it, before the call's work) must not end the probe. A block
    with no uses holds nothing."""
    a, b = torch.ones(4), torch.empty(4)

    def body():
        with cprr.accesses("ext_plain", reads=[a], writes=[b]):
            b.mul_(0)
        with cprr.accesses("ext_opaque", uses=[a, b]):
            b.mul_(0)

    native = _logged(capture_kind, body)
    names = [o["name"].split(" at ")[0] for o in native.log]
    opaque = names.index("ext_opaque")
    assert names[opaque + 1].startswith("aten.mul_"), names
    assert native.probe_holds == [("hold", opaque + 1), ("release", opaque + 2)], (
        native.probe_holds, names)

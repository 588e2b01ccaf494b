"""cprr._uninit.Tracker: which tensors it tracks and which byte spans each aten op reads/writes.

The native side is a fake that records track() (returning increasing buffer ids) and
library_op() calls; spans are (buffer id, byte offset, byte length).
"""

import torch

from cprr import _uninit

F32 = 4  # bytes of a float32


class FakeNative:
    def __init__(self):
        self.tracks = []  # (label, address, size, is_cuda, stream)
        self.ops = []  # (name, reads, writes)

    def track(self, label, address, size, is_cuda, stream):
        self.tracks.append((label, address, size, is_cuda, stream))
        return len(self.tracks)  # buffer ids 1, 2, ...

    def library_op(self, name, reads, writes):
        self.ops.append((name, list(reads), list(writes)))


def make():
    native = FakeNative()
    return native, _uninit.Tracker(native)


def op_names(native):
    return [name.split(" at ")[0] for name, _, _ in native.ops]


def test_empty_then_accumulate_reads_the_whole_span():
    native, tracker = make()
    with tracker:
        acc = torch.empty(16)
        x = torch.ones(16)
        acc += x
    assert len(native.tracks) == 1
    label, address, size, is_cuda, stream = native.tracks[0]
    assert label.startswith("torch.empty(16,) at test_uninit.py:")
    assert address == acc.data_ptr() and size == 16 * F32
    assert (is_cuda, stream) == (False, 0)
    assert len(native.ops) == 1
    name, reads, writes = native.ops[0]
    assert name.startswith("aten.add_ at test_uninit.py:")
    assert reads == [(1, 0, 16 * F32)]  # acc += x reads acc (x is not tracked)
    assert writes == [(1, 0, 16 * F32)]


def test_zeros_and_full_are_not_tracked():
    native, tracker = make()
    with tracker:
        z = torch.zeros(8)
        f = torch.full((8,), 2.0)
        z += f
        f.mul_(z)
        (z + f).sum()
    assert native.tracks == []
    assert native.ops == []


def test_ops_touching_no_tracked_tensor_log_nothing():
    native, tracker = make()
    with tracker:
        e = torch.empty(4)
        e.fill_(1.0)
        native.ops.clear()
        a = torch.ones(4)
        a.add_(2.0)
        torch.mm(torch.ones(2, 2), torch.ones(2, 2))
    assert native.ops == []
    del e


def test_partial_write_then_whole_read_spans():
    native, tracker = make()
    with tracker:
        e = torch.empty(10)
        e[2:5].fill_(1.0)
        e.sum()
    assert len(native.tracks) == 1 and native.tracks[0][2] == 10 * F32
    assert op_names(native) == ["aten.fill_", "aten.sum"]
    _, fill_reads, fill_writes = native.ops[0]
    assert fill_reads == []
    assert fill_writes == [(1, 2 * F32, 3 * F32)]  # only the slice: bytes 8..20
    _, sum_reads, sum_writes = native.ops[1]
    assert sum_reads == [(1, 0, 10 * F32)]  # the whole tensor
    assert sum_writes == []


def test_reading_through_a_view_reads_only_its_span():
    native, tracker = make()
    with tracker:
        e = torch.empty(8)
        e[3:7].sum()
    assert native.ops[0][1] == [(1, 3 * F32, 4 * F32)]


def test_out_argument_is_written_not_read():
    native, tracker = make()
    with tracker:
        out = torch.empty(4)
        torch.add(torch.ones(4), torch.ones(4), out=out)
    assert len(native.ops) == 1
    _, reads, writes = native.ops[0]
    assert reads == []
    assert writes == [(1, 0, 4 * F32)]


def test_out_argument_with_a_tracked_input_reads_the_input():
    native, tracker = make()
    with tracker:
        a = torch.empty(4)
        out = torch.empty(4)
        torch.mul(a, 2.0, out=out)
    assert len(native.ops) == 1
    _, reads, writes = native.ops[0]
    assert reads == [(1, 0, 4 * F32)]
    assert writes == [(2, 0, 4 * F32)]


def test_overwriting_inplace_ops_write_without_reading_the_target():
    native, tracker = make()
    with tracker:
        a = torch.empty(4)
        a.fill_(0.0)
        a.copy_(torch.ones(4))
        a.masked_fill_(torch.tensor([True, False, True, False]), 3.0)
    assert op_names(native) == ["aten.fill_", "aten.copy_", "aten.masked_fill_"]
    for name, reads, writes in native.ops:
        assert reads == [], name
        assert writes == [(1, 0, 4 * F32)], name


def test_copy_from_a_tracked_source_reads_the_source():
    native, tracker = make()
    with tracker:
        src = torch.empty(4)
        dst = torch.zeros(4)
        dst.copy_(src)
    assert native.ops == [(native.ops[0][0], [(1, 0, 4 * F32)], [])]
    assert native.ops[0][0].startswith("aten.copy_ at ")


def test_arithmetic_inplace_reads_its_target():
    native, tracker = make()
    with tracker:
        a = torch.empty(4)
        a.mul_(2.0)
        a.clamp_(0.0, 1.0)
    assert op_names(native) == ["aten.mul_", "aten.clamp_"]
    for _, reads, writes in native.ops:
        assert reads == [(1, 0, 4 * F32)]
        assert writes == [(1, 0, 4 * F32)]


def test_views_log_nothing_by_themselves():
    native, tracker = make()
    with tracker:
        v = torch.empty(8)
        a = v[2:6]
        b = v.detach()
        c = v.view(2, 4)
        d = c.t().unsqueeze(0)
        assert native.ops == []
        c.sum()  # a read through a view is still logged, as the view's span
    assert len(native.tracks) == 1
    assert native.ops[0][1] == [(1, 0, 8 * F32)]
    del a, b, d


def test_new_empty_and_empty_like_track_the_new_tensor_without_reading_the_source():
    native, tracker = make()
    with tracker:
        src = torch.empty(8)
        n = src.new_empty(3)
        like = torch.empty_like(src)
    assert native.ops == []  # neither reads src
    assert [t[0].split(" at ")[0] for t in native.tracks] == [
        "torch.empty(8,)", "torch.new_empty(3,)", "torch.empty_like(8,)"]
    assert [t[1] for t in native.tracks] == [src.data_ptr(), n.data_ptr(), like.data_ptr()]
    assert [t[2] for t in native.tracks] == [8 * F32, 3 * F32, 8 * F32]
    with tracker:
        n.sum()
        like.sum()
    assert [r for _, r, _ in native.ops] == [[(2, 0, 3 * F32)], [(3, 0, 8 * F32)]]


def test_empty_strided_spans_from_first_to_last_element():
    native, tracker = make()
    with tracker:
        t = torch.empty_strided((2, 3), (1, 2))  # elements at 0..5: 6 floats
        gaps = torch.empty_strided((3,), (2,))  # elements at 0, 2, 4: 5 floats of storage
        t.sum()
        gaps.sum()
    assert [x[2] for x in native.tracks] == [6 * F32, 5 * F32]
    assert [r for _, r, _ in native.ops] == [[(1, 0, 6 * F32)], [(2, 0, 5 * F32)]]


def test_note_logs_a_read_of_a_tracked_tensor_only():
    native, tracker = make()
    with tracker:
        tracked = torch.empty(6)
        untracked = torch.zeros(6)
    tracker.note("ctx.output('x')", reads=[untracked])
    assert native.ops == []
    tracker.note("ctx.output('x')", reads=[tracked])
    tracker.note("ctx.probe('part')", reads=[tracked[1:3]])
    tracker.note("dist.recv", writes=[tracked])
    assert len(native.ops) == 3
    name, reads, writes = native.ops[0]
    assert name.startswith("ctx.output('x') at test_uninit.py:")
    assert (reads, writes) == ([(1, 0, 6 * F32)], [])
    assert native.ops[1][1:] == ([(1, 1 * F32, 2 * F32)], [])
    assert native.ops[2][1:] == ([], [(1, 0, 6 * F32)])


def test_note_ignores_empty_tensors():
    native, tracker = make()
    with tracker:
        t = torch.empty(4)
    tracker.note("ctx.output('e')", reads=[t[0:0]])
    assert native.ops == []


def test_reused_address_of_a_freed_tracked_tensor_is_not_tracked():
    """A tracked tensor is freed and torch.zeros gets its address: ops on the zeros tensor must
    not be logged as touching the freed buffer."""
    n = 1024
    reused = 0
    native, tracker = make()
    for _ in range(200):
        with tracker:
            e = torch.empty(n)
            address = e.data_ptr()
            del e
            z = torch.zeros(n)
            before = len(native.ops)
            z.add_(1.0)
            z.sum()
            assert len(native.ops) == before, (
                f"ops on a torch.zeros tensor at {z.data_ptr():#x} were logged: "
                f"{native.ops[before:]}")
            reused += z.data_ptr() == address
        if reused >= 3:
            break
    if reused == 0:  # the deterministic test below covers the mechanism
        import pytest

        pytest.skip("the allocator never gave a freed tensor's address to the next one")


class _FakeOp:
    """Stands in for an aten overload: the schema and name of aten.zeros, returning `result`."""

    def __init__(self, result):
        self._schema = torch.ops.aten.zeros.default._schema
        self.overloadpacket = torch.ops.aten.zeros
        self._result = result

    def __call__(self, *args, **kwargs):
        return self._result


def test_an_op_output_at_a_tracked_address_drops_it():
    native, tracker = make()
    with tracker:
        e = torch.empty(4)
        e.add_(1.0)
    assert len(native.ops) == 1  # tracked
    # An op that made a tensor at e's address (as a reused allocation would): not tracked now.
    out = tracker.__torch_dispatch__(_FakeOp(e), (), ([4],), {})
    assert out is e
    with tracker:
        e.add_(1.0)
        e.sum()
    assert len(native.ops) == 1
    assert len(native.tracks) == 1  # and zeros does not track it anew


def test_an_empty_op_output_at_a_tracked_address_is_tracked_anew():
    native, tracker = make()
    with tracker:
        e = torch.empty(4)
    fake = _FakeOp(e)
    fake._schema = torch.ops.aten.empty.memory_format._schema
    fake.overloadpacket = torch.ops.aten.empty
    tracker.__torch_dispatch__(fake, (), ([4],), {})
    assert len(native.tracks) == 2
    with tracker:
        e.sum()
    assert native.ops[-1][1] == [(2, 0, 4 * F32)]  # the new buffer id, not the old one

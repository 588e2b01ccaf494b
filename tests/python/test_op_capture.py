"""cprr.capture.op_capture.OpCapture on CPU tensors (torch 1.13 in CI): which tensors it tracks, in
which order, which byte spans each aten op reads and writes (views as their spans), on which
stream, and how frees and record_stream order the reuse of memory.

The native side is conftest's FakeNative. Spans are (buffer id, byte offset, byte length). With
the capture's parts: what an op reads and writes (cprr.capture.op_schema), the memory it names
(cprr.capture.tensor_table), where in the case's code (cprr.capture.where) and what it does
outside the op log (cprr.capture.outside).
"""

import sys

import pytest
import torch

from conftest import FakeCprr, FakeNative
from cprr.capture import op_capture as _op_capture
from cprr.capture import tensor_table as _tensor_table
from cprr.capture.tensor_table import Entry, key_of

F32 = 4  # bytes of a float32


# The capture make() gives (test_native_capture.py runs tests of this file with the C++ one).
CAPTURE = _op_capture.OpCapture


def make(device_backend=False):
    native = FakeNative()
    return native, CAPTURE(native, device_backend=device_backend)


def op_names(native):
    return [name.split(" at ")[0] for name, _, _ in native.ops]


def buffer_of(native, t):
    """The buffer id the capture tracked `t`'s memory as (the last one at its address)."""
    ids = [i + 1 for i, tr in enumerate(native.tracks) if tr.address == t.data_ptr()]
    return ids[-1]


# ---- what is tracked, and in which order --------------------------------------------------


def test_every_tensor_an_op_makes_is_tracked_in_order_and_written_by_it():
    native, capture = make()
    with capture:
        a = torch.ones(4)
        b = torch.empty(6)
        c = a * 2
    labels = [t.name.split(" at ")[0] for t in native.tracks]
    assert labels == ["torch.ones(4,)", "torch.empty(6,)", "torch.mul(4,)"]
    assert [t.address for t in native.tracks] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]
    assert [t.bytes for t in native.tracks] == [4 * F32, 6 * F32, 4 * F32]
    assert op_names(native) == ["aten.ones", "aten.empty", "aten.mul"]
    # ones and mul write what they made; empty writes nothing (its tensor is unwritten).
    assert [t.written_by for t in native.tracks] == [0, -1, 2]
    assert native.ops[0][2] == [(1, 0, 4 * F32)]
    assert native.ops[1][2] == []
    assert native.ops[2] == (native.ops[2][0], [(1, 0, 4 * F32)], [(3, 0, 4 * F32)])
    assert native.tracks[0].name.split(" at ")[1].startswith("test_op_capture.py:")


def test_empty_then_accumulate_reads_the_whole_span():
    native, capture = make()
    with capture:
        acc = torch.empty(16)
        x = torch.ones(16)
        acc += x
    _, reads, writes = native.ops[-1]
    assert native.ops[-1][0].startswith("aten.add_ at test_op_capture.py:")
    assert reads == [(1, 0, 16 * F32), (2, 0, 16 * F32)]  # acc += x reads acc and x
    assert writes == [(1, 0, 16 * F32)]


def test_partial_write_then_whole_read_spans():
    native, capture = make()
    with capture:
        e = torch.empty(10)
        e[2:5].fill_(1.0)
        e.sum()
    assert op_names(native) == ["aten.empty", "aten.fill_", "aten.sum"]
    _, fill_reads, fill_writes = native.ops[1]
    assert fill_reads == []
    assert fill_writes == [(1, 2 * F32, 3 * F32)]  # only the slice: bytes 8..20
    _, sum_reads, sum_writes = native.ops[2]
    assert sum_reads == [(1, 0, 10 * F32)]
    assert sum_writes == [(2, 0, F32)]  # the 0-d result sum made


def test_reading_through_a_view_reads_only_its_span():
    native, capture = make()
    with capture:
        e = torch.empty(8)
        e[3:7].sum()
    assert native.ops[-1][1] == [(1, 3 * F32, 4 * F32)]


def test_a_strided_view_reads_each_of_its_contiguous_runs():
    native, capture = make()
    with capture:
        m = torch.zeros(4, 4)
        m[:, 1].sum()  # elements 1, 5, 9, 13
        m[:, :2].sum()  # elements 0-1, 4-5, 8-9, 12-13
        m.t().sum()  # every element: one run, whatever the order
        m.expand(2, 4, 4)[:, 1:3].sum()  # rows 1 and 2, read twice: one run
    assert [reads for _, reads, _ in native.ops[-4:]] == [
        [(1, 1 * F32, F32), (1, 5 * F32, F32), (1, 9 * F32, F32), (1, 13 * F32, F32)],
        [(1, 0, 2 * F32), (1, 4 * F32, 2 * F32), (1, 8 * F32, 2 * F32), (1, 12 * F32, 2 * F32)],
        [(1, 0, 16 * F32)],
        [(1, 4 * F32, 8 * F32)],
    ]


def test_a_view_of_more_runs_than_the_cap_reads_its_whole_extent():
    native, capture = make()
    with capture:
        m = torch.zeros(_tensor_table.MAX_RUNS + 1, 4)
        m[:, 0].sum()
    assert native.ops[-1][1] == [(1, 0, (4 * _tensor_table.MAX_RUNS + 1) * F32)]


def test_out_argument_is_written_not_read():
    native, capture = make()
    with capture:
        out = torch.empty(4)
        x = torch.ones(4)
        torch.add(x, x, out=out)
    _, reads, writes = native.ops[-1]
    assert reads == [(2, 0, 4 * F32), (2, 0, 4 * F32)]
    assert writes == [(1, 0, 4 * F32)]


def test_overwriting_inplace_ops_write_without_reading_the_target():
    native, capture = make()
    with capture:
        a = torch.empty(4)
        a.fill_(0.0)
        a.copy_(torch.ones(4))
        a.masked_fill_(torch.tensor([True, False, True, False]), 3.0)
    ops = [o for o in native.ops if o[0].split(" at ")[0] in ("aten.fill_", "aten.copy_",
                                                             "aten.masked_fill_")]
    assert [o[0].split(" at ")[0] for o in ops] == ["aten.fill_", "aten.copy_",
                                                    "aten.masked_fill_"]
    for name, reads, writes in ops:
        assert (1, 0, 4 * F32) not in reads, name
        assert writes == [(1, 0, 4 * F32)], name


def test_arithmetic_inplace_reads_its_target():
    native, capture = make()
    with capture:
        a = torch.empty(4)
        a.mul_(2.0)
        a.clamp_(0.0, 1.0)
    assert op_names(native)[1:] == ["aten.mul_", "aten.clamp_"]
    for _, reads, writes in native.ops[1:]:
        assert reads == [(1, 0, 4 * F32)]
        assert writes == [(1, 0, 4 * F32)]


def test_views_log_nothing_by_themselves():
    native, capture = make()
    with capture:
        v = torch.empty(8)
        before = len(native.log)
        a = v[2:6]
        b = v.detach()
        c = v.view(2, 4)
        d = c.t().unsqueeze(0)
        assert len(native.log) == before
        c.sum()  # a read through a view is still logged, as the view's span
    assert native.ops[-1][1] == [(1, 0, 8 * F32)]
    assert len([t for t in native.tracks if t.written_by == -1]) == 1
    del a, b, d


def test_new_empty_and_empty_like_track_the_new_tensor_without_reading_the_source():
    native, capture = make()
    with capture:
        src = torch.empty(8)
        n = src.new_empty(3)
        like = torch.empty_like(src)
    assert all(reads == [] for _, reads, _ in native.ops)  # neither reads src
    assert [t.name.split(" at ")[0] for t in native.tracks] == [
        "torch.empty(8,)", "torch.new_empty(3,)", "torch.empty_like(8,)"]
    assert [t.bytes for t in native.tracks] == [8 * F32, 3 * F32, 8 * F32]
    assert [t.written_by for t in native.tracks] == [-1, -1, -1]
    with capture:
        n.sum()
        like.sum()
    assert [r for _, r, _ in native.ops[-2:]] == [[(2, 0, 3 * F32)], [(3, 0, 8 * F32)]]


def test_metadata_queries_read_no_bytes():
    # pin_memory asks is_pinned of its source first: of a tensor nothing wrote yet, here.
    native, capture = make()
    with capture:
        src = torch.empty(8)
        before = len(native.log)
        assert not src.is_pinned()
        assert src.is_contiguous() and src.dim() == 1 and src.storage_offset() == 0
        assert len(native.log) == before  # nothing logged: no op read src's bytes
        src.sum()  # a real read still is
    assert native.ops[-1][1] == [(1, 0, 8 * F32)]


def test_cprrs_own_work_is_no_op_of_the_case():
    # cprr.distributed.staging's host copies of a message: the op log has the message, not its
    # copies.
    native, capture = make()
    with capture:
        target = torch.empty(4)
        with capture.own_work():
            host = torch.full((4,), 2.0)
            target.copy_(host)
        assert not capture.inside_op
        total = target.sum()
    assert op_names(native) == ["aten.empty", "aten.sum"]
    assert [t.name.split(" at ")[0] for t in native.tracks] == ["torch.empty(4,)", "torch.sum()"]
    assert total.item() == 8.0


def _moves(native):
    """(op name, moves) of the access ops, in order."""
    return [(o["name"].split(" at ")[0], o["moves"]) for o in native.log
            if o["kind"] in ("kernel", "copy", "host")]


def test_copies_of_contiguous_tensors_only_move_bytes_and_other_ops_do_not():
    native, capture = make()
    with capture:
        a, b = torch.empty(4), torch.ones(4)
        a.clone()
        torch.cat([a, b])
        a.to(torch.float64)
        b.copy_(a)
        (a + b).sum()
    assert _moves(native)[2:] == [("aten.clone", True), ("aten.cat", True),
                                  ("aten._to_copy", True), ("aten.copy_", True),
                                  ("aten.add", False), ("aten.sum", False)]


def test_a_copy_that_is_not_its_reads_laid_end_to_end_is_a_plain_read():
    native, capture = make()
    with capture:
        m, n = torch.empty(2, 3), torch.ones(2, 3)
        torch.cat([m, n], dim=1)  # rows interleave
        m.t().clone()  # strided read
        n.copy_(torch.zeros(1))  # broadcast: one element read six times
        torch.ones(1, 2, 2, 2).clone(memory_format=torch.channels_last)  # another layout
    assert [moves for name, moves in _moves(native)
            if name in ("aten.cat", "aten.clone", "aten.copy_")] == [False, False, False, False]


def test_empty_strided_spans_from_first_to_last_element():
    native, capture = make()
    with capture:
        t = torch.empty_strided((2, 3), (1, 2))  # elements at 0..5: 6 floats
        gaps = torch.empty_strided((3,), (2,))  # elements at 0, 2, 4: 5 floats of storage
    assert [x.bytes for x in native.tracks] == [6 * F32, 5 * F32]
    del t, gaps


def test_an_op_returning_several_tensors_tracks_each():
    native, capture = make()
    with capture:
        x = torch.tensor([3.0, 1.0, 2.0])
        values, indices = torch.sort(x)
    made = native.tracks[-2:]
    assert [t.address for t in made] == [values.data_ptr(), indices.data_ptr()]
    assert [t.bytes for t in made] == [3 * F32, 3 * 8]  # float32 values, int64 indices
    first = len(native.tracks) - 1
    assert native.ops[-1][2] == [(first, 0, 3 * F32), (first + 1, 0, 3 * 8)]


# ---- streams -------------------------------------------------------------------------------


def test_on_the_cpu_backend_every_op_is_on_stream_0():
    native, capture = make(device_backend=False)
    with capture:
        a = torch.ones(4)
        a.add_(1.0)
    assert {o["stream"] for o in native.log} == {0}
    assert {o["kind"] for o in native.log} == {"kernel"}


def test_on_a_device_backend_cpu_tensors_are_the_hosts():
    native, capture = make(device_backend=True)
    with capture:
        a = torch.ones(4)
        a.add_(1.0)
    assert {o["stream"] for o in native.log} == {-1}
    assert {o["kind"] for o in native.log} == {"host"}


# ---- frees, reuse and record_stream ---------------------------------------------------------


def test_a_freed_address_made_anew_is_another_buffer():
    native, capture = make()
    reused = False
    for _ in range(200):
        with capture:
            e = torch.empty(1024)
            address = e.data_ptr()
            first = buffer_of(native, e)
            del e
            z = torch.zeros(1024)
            z.add_(1.0)
        if z.data_ptr() == address:
            reused = True
            second = buffer_of(native, z)
            assert second != first
            assert native.ops[-1][1] == [(second, 0, 1024 * F32)]
            break
    if not reused:
        pytest.skip("the allocator never gave a freed tensor's address to the next one")


def test_a_free_orders_its_reuse_after_the_streams_record_stream_named():
    native, capture = make(device_backend=True)
    key = ("cuda", 0, 0x1000)
    capture.tensors[key] = Entry(buffer=7, stream=0)
    capture.tensors.get(key).uses.update({2, 1})
    capture.freed(0, 0x1000)
    orders = [(o["kind"], o["stream"], o["event"]) for o in native.log]
    # One event per using stream, recorded there; the allocating stream waits for each.
    assert orders == [("record", 1, 0), ("wait", 0, 0), ("record", 2, 1), ("wait", 0, 1)]
    assert native.freed == [(7, 0)]
    assert key not in capture.tensors
    capture.freed(0, 0x1000)  # freed once: a second free of the address is not ours
    assert len(native.log) == 4


def test_a_free_without_record_stream_orders_nothing():
    native, capture = make(device_backend=True)
    capture.tensors[("cuda", 0, 0x2000)] = Entry(buffer=3, stream=1)
    capture.freed(0, 0x2000)
    assert native.log == []
    assert native.freed == [(3, 1)]
    capture.freed(1, 0x2000)  # another device's address: not tracked
    assert native.freed == [(3, 1)]


def test_torch_tensor_data_is_a_new_tensor_the_host_wrote_even_at_a_tracked_address():
    native, capture = make()
    with capture:
        t = torch.tensor([1.0, 2.0, 3.0])
        # A stale entry at its address (memory freed unseen) must not stand for it.
        capture.tensors[key_of(t)] = Entry(buffer=99, stream=0, size=4)
        capture._lifted(t)
        t.sum()
    buffer = buffer_of(native, t)
    track = native.tracks[buffer - 1]
    assert track.name.startswith("torch.tensor(3,) at ")
    assert track.bytes == 3 * F32 and track.written_by >= 0
    assert native.ops[-1][1] == [(buffer, 0, 3 * F32)]


def test_a_host_tensor_bigger_than_its_stale_entry_is_found_anew():
    native, capture = make()
    t = torch.ones(4)
    key = key_of(t)
    capture.tensors[key] = Entry(buffer=99, stream=0, size=2 * F32)
    (touch,) = capture.touches([t])
    assert touch[0] != 99 and touch[2] == 4 * F32
    assert capture.tensors.get(key).size == 4 * F32
    # Within its size the entry stands.
    assert capture.touches([t[:2]])[0][0] == touch[0]


def test_with_cprrs_allocator_frees_are_logged_at_the_next_op_and_at_the_end():
    native = FakeNative(backend="cuda", device_index=0)  # cprr's arena is torch's allocator
    capture = _op_capture.OpCapture(native, device_backend=True, allocator=True)
    capture.tensors[("cuda", 0, 0x1000)] = Entry(buffer=7, stream=0)
    capture.tensors.get(("cuda", 0, 0x1000)).uses.add(2)
    capture.tensors[("cuda", 0, 0x3000)] = Entry(buffer=8, stream=1)
    native.released = [0x1000, 0x5000]  # 0x5000: memory no tracked tensor had
    with capture:
        torch.ones(4)
    # Before the op: the free, after its record_stream use (as the arena orders it).
    assert [(o["kind"], o["stream"]) for o in native.log[:2]] == [("record", 2), ("wait", 0)]
    assert native.freed == [(7, 0)]
    assert op_names(native) == ["aten.ones"]
    native.released = [0x3000]
    capture.finish()
    assert native.freed == [(7, 0), (8, 1)]


def test_used_by_adds_a_use_only_for_other_streams_host_memory_included():
    native, capture = make(device_backend=True)
    with capture:
        cpu = torch.ones(4)
    capture.used_by([cpu], capture.host)  # the host's own: no use
    assert all(not t.uses for t in capture.tensors.values())
    capture.used_by([cpu], 3)  # an async call's Work holds host memory until the call is done
    assert capture.tensors.get(key_of(cpu)).uses == {3}


def test_host_memory_an_async_call_used_is_reused_after_the_call():
    """An async call's Work holds its host tensors until the call is done, so their memory comes
    back only after it: a tensor made at that address waits for the call's stream, and its write
    is logged after that wait, not by the op logged before its address was known."""
    native, capture = make()
    for _ in range(200):
        start = len(native.log)
        with capture:
            t = torch.ones(1024)
            stream = capture.streams.new_stream()  # as cprr.distributed.work.issue's
            capture.used_by([t], stream)
            address = t.data_ptr()
            del t
            z = torch.zeros(1024)
            if z.data_ptr() != address:
                continue
            steps = [(o["kind"], o["stream"], o["event"]) for o in native.log]
            (zeros,) = [i for i, o in enumerate(native.log)
                        if i >= start and o["name"].startswith("aten.zeros")
                        and "memory reused" not in o["name"]]
            record, wait, write = steps[zeros + 1:zeros + 4]
            assert record[:2] == ("record", stream) and wait == ("wait", 0, record[2]), steps
            assert native.log[zeros]["writes"] == [], native.log[zeros]  # before the wait
            assert write[:2] == ("host", 0), steps
            assert native.log[zeros + 3]["writes"] == [(buffer_of(native, z), 0, 1024 * F32)]
            z.add_(1.0)  # the uses were waited for once: nothing more to wait for
            assert [o["kind"] for o in native.log[zeros + 4:]] == ["kernel"], steps  # add_ alone
            return
    pytest.skip("the allocator never gave a freed tensor's address to the next one")


# ---- calls outside aten ---------------------------------------------------------------------


def test_note_logs_the_tensors_it_touches_on_their_stream():
    native, capture = make()
    with capture:
        tracked = torch.empty(6)
    capture.note("ctx.output('x')", reads=[tracked])
    capture.note("ctx.probe('part')", reads=[tracked[1:3]])
    capture.note("dist.recv", writes=[tracked], stream=5)
    name, reads, writes = native.ops[1]
    assert name.startswith("ctx.output('x') at test_op_capture.py:")
    assert (reads, writes) == ([(1, 0, 6 * F32)], [])
    assert native.ops[2][1:] == ([(1, 1 * F32, 2 * F32)], [])
    assert native.ops[3][1:] == ([], [(1, 0, 6 * F32)])
    assert [o["stream"] for o in native.log[1:]] == [0, 0, 5]


def test_a_tensor_from_before_the_case_is_tracked_at_its_first_use_as_written_before_it():
    """A module's buffer made before the case: its whole storage is tracked from its first use,
    written by a host op just before it, so reading it is no uninitialized read and its later
    uses are checked like any tensor's."""
    native, capture = make(device_backend=True)
    buffer = torch.zeros(8)  # made outside the capture
    with capture:
        buffer[2:4].sum()
        buffer.add_(1.0)
    found = native.log[0]
    assert (found["kind"], found["stream"]) == ("host", -1)
    assert found["name"].startswith(
        "cpu tensor memory (32 bytes) from before the case, first used at test_op_capture.py:")
    assert (native.tracks[0].address, native.tracks[0].bytes) == (buffer.data_ptr(), 8 * F32)
    assert native.tracks[0].written_by == 0  # written by that host op
    assert found["writes"] == [(1, 0, 8 * F32)]
    assert native.ops[1][1] == [(1, 2 * F32, 2 * F32)]  # the sum reads its view's bytes
    assert native.ops[-1][2] == [(1, 0, 8 * F32)]  # add_ writes the same buffer: found once


def test_note_ignores_empty_tensors():
    native, capture = make()
    with capture:
        t = torch.empty(4)
    capture.note("ctx.output('e')", reads=[t[0:0]])
    assert len(native.log) == 1


def test_adopt_logs_ops_against_the_given_allocation():
    native, capture = make()
    memory = torch.zeros(8)  # as ctx.symmetric_empty's tensor over cprr's arena
    capture.adopt(memory, 42)
    with capture:
        memory[4:].fill_(1.0)
    assert native.ops[-1][2] == [(42, 4 * F32, 4 * F32)]


def test_warm_up_runs_under_a_capture_that_logs_nothing():
    _op_capture.warm_up()


class _FakeOp:
    """Stands in for an aten overload: `name`'s schema, returning `result` when called."""

    def __init__(self, overload, result):
        self._schema = overload._schema
        self.overloadpacket = overload.overloadpacket
        self._result = result

    def __call__(self, *args, **kwargs):
        return self._result


def test_pinned_memory_made_anew_waits_for_the_copies_that_used_it():
    """torch's host allocator hands pinned memory out again only once the non_blocking copies
    that used it completed: the reuse is logged as host waits for their events, before the op
    that writes the new tensor."""
    native, capture = make(device_backend=True)
    reused = torch.zeros(4)  # stands for pinned memory handed out again
    capture._order.pinned_used(key_of(reused), 1)  # two copies used it (CI cannot pin memory)
    capture._order.pinned_used(key_of(reused), 2)
    made = capture.__torch_dispatch__(_FakeOp(torch.ops.aten.ones.default, reused), (), ([4],),
                                      {})
    assert made is reused
    steps = [(o["kind"], o["stream"], o["event"], o["writes"]) for o in native.log]
    assert steps == [
        ("record", 1, 0, []),
        ("record", 2, 1, []),
        ("host", -1, -1, []),  # aten.ones, logged before it ran: not its write any more
        ("wait", -1, 0, []),
        ("wait", -1, 1, []),
        ("host", -1, -1, [(1, 0, 4 * F32)]),  # the write of the reused memory, after the waits
    ]
    assert native.tracks[0].written_by == 5
    assert not capture._order.pinned_reused(key_of(reused))  # waited for once


def test_an_op_returning_its_input_memory_makes_nothing():
    """_unsafe_view (what matmul reshapes with) returns a tensor over its input's memory though
    its schema says it aliases nothing: it is not a new tensor, and writes nothing."""
    native, capture = make()
    with capture:
        x = torch.ones(4)
    before = len(native.tracks)
    out = capture.__torch_dispatch__(_FakeOp(torch.ops.aten._unsafe_view.default, x), (),
                                     (x, [2, 2]), {})
    assert out is x
    assert len(native.tracks) == before
    assert native.log[-1]["writes"] == []


def test_work_before_torch_tensors_lift_is_the_constructors_and_other_work_is_outside():
    native = FakeNative()
    counter = FakeCprr()
    capture = _op_capture.OpCapture(native, device_backend=True, counter=counter)
    with capture:
        capture.count_outside("allocation")  # as torch.tensor(data, device=cuda) allocates...
        torch.tensor([1.0, 2.0])  # ...before its lift_fresh
        assert capture.outside == {}
        assert counter.calls[0] == "forgive"
        capture.count_outside("allocation")  # and now before an ordinary op: outside
        torch.ones(2)
    capture.count_outside("allocation")  # pending at the end: outside too
    capture.finish()
    assert capture.outside == {"allocation": 2}
    # Every op torch ran under the capture was inside seen work, entered and left in pairs.
    assert counter.calls.count("enter") == counter.calls.count("leave") > 0


def test_an_op_is_named_at_the_case_line_that_called_an_installed_package_not_inside_it():
    """A Triton kernel is launched by Triton's own launcher: the op's file:line is the case's
    call into the package, the first frame outside torch, cprr and installed packages."""
    from cprr.capture.where import caller

    namespace = {}
    for where in ("site-packages", "dist-packages"):
        exec(compile("def launch(report):\n    return report()\n",
                     f"/opt/venv/lib/python3/{where}/triton/driver.py", "exec"), namespace)
        line = sys._getframe().f_lineno + 1
        got = namespace["launch"](caller)
        assert got == f"test_op_capture.py:{line}", (where, got)


def test_a_gpu_ops_0_dim_cpu_tensors_are_read_by_the_host_as_it_is_issued(monkeypatch):
    """fill_(value) and a wrapped Python number on the GPU: the host reads a 0-dim CPU tensor as
    it issues the op, so no stream read of it is logged (freed and its address reused by the next
    torch.tensor(), it would race with that tensor's host write). A copy between host and device
    reads it on its stream; an op of the host reads it as ever. (CI has no GPU: the op's device
    is stood in for.)"""
    from cprr.capture import op_schema as _op_schema

    fill = _op_schema.plan(torch.ops.aten.fill_.Tensor)
    copy = _op_schema.plan(torch.ops.aten.copy_.default)
    out, value = torch.zeros(4), torch.tensor(2.0)
    on_host = _op_schema.Accesses(fill, (out, value), {})
    assert [t is value for t in on_host.reads] == [True]

    monkeypatch.setattr(_op_schema, "device_of", lambda tensors, kwargs: torch.device("cuda", 0))
    on_gpu = _op_schema.Accesses(fill, (out, value), {})
    assert on_gpu.reads == [] and on_gpu.writes[0] is out
    monkeypatch.setattr(_op_schema, "crosses", lambda tensors, kwargs: True)
    copied = _op_schema.Accesses(copy, (out, value), {})
    assert any(t is value for t in copied.reads)

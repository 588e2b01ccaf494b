"""cprr.capture.symmetric: torch's symmetric windows as the layout check sees them, on CPU (torch
1.13 in CI has no torch.distributed._symmetric_memory, so its calls are stand-ins here; on the GPU,
tools/device/run_gpu_checks.sh pysymmetric drives torch's own with corpus/python_nccl).

A window's start is the sum of the sizes of the windows registered before it; a tensor's place
is its window's start plus its offset in the window. The op capture logs a tensor made in a
registered window at that place (native.track's symmetric_offset), symm_mem.empty's tensors as
unwritten memory, and a tensor whose window a rendezvous registered with one mark at its place.
"""

import contextlib

import torch

from conftest import FakeNative
from cprr.capture import op_capture as _op_capture
from cprr.capture import symmetric as _symmetric

MiB = 1 << 20


class FakePool:
    """A torch.cuda.MemPool's snapshot(): its segments."""

    def __init__(self, *segments):
        self.segments = list(segments)
        self.looks = 0

    def snapshot(self):
        self.looks += 1
        return [{"address": a, "total_size": s} for a, s in self.segments]


def test_windows_are_laid_end_to_end_in_the_order_they_appeared_not_by_address():
    space = _symmetric.SymmetricSpace()
    assert space.add_window(0x9000000, 2 * MiB) == 0
    assert space.add_window(0x1000, MiB) == 2 * MiB  # a lower address, but later
    assert space.place(0x9000000 + 64) == 64
    assert space.place(0x1000) == 2 * MiB
    assert space.place(0x1000 + MiB - 1) == 3 * MiB - 1
    assert space.place(0x1000 + MiB) is None  # between the windows
    assert space.place(0x10) is None


def test_a_window_at_the_memory_of_a_freed_one_is_a_new_window():
    space = _symmetric.SymmetricSpace()
    space.add_window(0x1000, MiB)
    space.add_window(0x1000 + 4 * MiB, MiB)
    assert space.add_window(0x1000, MiB) == 2 * MiB
    assert space.place(0x1000) == 2 * MiB
    assert space.place(0x1000 + 4 * MiB) == MiB


def test_a_rendezvous_registers_the_pool_segment_holding_the_memory_as_the_next_window():
    space = _symmetric.SymmetricSpace()
    pool = FakePool((0x100000, 2 * MiB), (0x800000, 2 * MiB))
    space.add_pool(pool)
    assert space.place(0x800000) is None  # a segment nobody registered is ordinary memory
    assert space.register(0x800000 + 64) == 64  # the higher address, registered first
    assert space.register(0x100000 + 8) == 2 * MiB + 8
    looks = pool.looks
    assert space.register(0x800000 + 128) == 128  # registered: no new window, no look
    assert pool.looks == looks


def test_a_rendezvous_outside_any_pool_takes_the_allocation_from_the_handle():
    class Handle:
        buffer_size = 4096
        offset = 512

    space = _symmetric.SymmetricSpace()
    space.add_window(0x10, 64)
    assert space.register(0x9000 + 512, Handle()) == 64 + 512
    assert space.place(0x9000) == 64
    assert space.register(0x70000, None) is None  # nothing says where its allocation is


class Recorder:
    """A running case's capture: what the wrappers tell it, and whether torch's own work ran
    inside in_op (not counted as work outside the op log)."""

    def __init__(self):
        self.made = []
        self.became = []
        self.inside = False
        self.ran_inside = []

    def made_symmetric(self, t):
        self.made.append(t)

    def became_symmetric(self, t, place):
        self.became.append((t, place))

    @contextlib.contextmanager
    def in_op(self):
        self.inside = True
        try:
            yield
        finally:
            self.inside = False

    def original(self, value):
        def run(*args, **kwargs):
            self.ran_inside.append(self.inside)
            return value
        return run


def test_symm_mem_empty_is_a_new_allocation_no_window_until_its_rendezvous():
    space = _symmetric.SymmetricSpace()
    stale = torch.empty(16)
    space.add_window(stale.data_ptr(), 64)  # a window whose memory went back and came again
    capture = Recorder()
    empty = _symmetric._wrap_empty(space, capture.original(stale), lambda: capture)
    t = empty(16, dtype=torch.float32)
    assert capture.made == [t]
    assert capture.ran_inside == [True]
    assert space.place(t.data_ptr()) is None
    # Outside a case nothing is told.
    outside = _symmetric._wrap_empty(space, lambda *size, **kw: torch.empty(*size, **kw),
                                     lambda: None)
    outside(4)


def test_rendezvous_registers_the_tensors_storage_and_tells_the_running_case():
    base = torch.empty(64)

    class Handle:  # torch's: the allocation's size, the storage's offset in it
        buffer_size = 256
        offset = 0

    space = _symmetric.SymmetricSpace()
    capture = Recorder()
    handle = Handle()
    rendezvous = _symmetric._wrap_rendezvous(space, capture.original(handle), lambda: capture)
    view = base[16:]
    assert rendezvous(view, "group") is handle
    assert capture.ran_inside == [True]  # its kernels and copies are torch's own
    # The window is the storage's allocation, and the place is the storage's, not the view's.
    assert capture.became == [(view, 0)]
    assert space.place(base.data_ptr() + 255) == 255


def test_get_mem_pool_under_cprrs_allocator_says_how_to_run_it():
    space = _symmetric.SymmetricSpace()

    def failing(device):
        raise RuntimeError("CUDAPluggableAllocator does not yet support beginAllocateToPool")

    get = _symmetric._wrap_get_mem_pool(space, failing, lambda: True, lambda: None)
    try:
        get("cuda:0")
        raise AssertionError("no error")
    except RuntimeError as e:
        assert "CPRR_TORCH_ALLOCATOR=off" in str(e)
        assert "beginAllocateToPool" in str(e)
    plain = _symmetric._wrap_get_mem_pool(space, failing, lambda: False, lambda: None)
    try:
        plain("cuda:0")
        raise AssertionError("no error")
    except RuntimeError as e:
        assert "CPRR_TORCH_ALLOCATOR" not in str(e)
    pool = FakePool((0x4000, MiB))
    assert _symmetric._wrap_get_mem_pool(space, lambda d: pool, lambda: False,
                                      lambda: None)("cuda:0") is pool
    assert space.place(0x4000) is None  # its segments are windows once registered
    assert space.register(0x4000) == 0


def test_install_without_torchs_symmetric_memory_is_none_or_a_space():
    space = _symmetric.install(lambda: None, lambda: False)
    try:
        import torch.distributed._symmetric_memory  # noqa: F401
    except ImportError:
        assert space is None
    else:
        assert isinstance(space, _symmetric.SymmetricSpace)


# ---- the op capture logs symmetric tensors at their place ---------------------------------


def short(track):
    """(name without " at <caller>", address, bytes, written_by, symmetric_offset)."""
    return (track.name.split(" at ")[0], track.address, track.bytes, track.written_by,
            track.symmetric_offset)


def test_a_tensor_made_in_a_window_is_tracked_at_its_place_and_found_memory_at_its_address():
    space = _symmetric.SymmetricSpace()
    space.add_window(0x10, 4096)
    space.add_window(0x100000, 1 << 48)  # every heap address here: each new tensor is in it
    before = torch.zeros(4)
    native = FakeNative()
    with _op_capture.OpCapture(native, symmetric=space):
        a = torch.ones(8)
        before.add_(1)
    assert short(native.tracks[0])[:4] == ("torch.ones(8,)", a.data_ptr(), 32, 0)
    assert native.tracks[0].symmetric_offset == 4096 + a.data_ptr() - 0x100000
    # Memory from before the case is found at its first use, at its address: only what the case
    # makes is compared across ranks, in the order it was made.
    assert native.tracks[1].name.startswith("cpu tensor memory")
    assert native.tracks[1].symmetric_offset == -1
    plain = FakeNative()
    with _op_capture.OpCapture(plain, symmetric=_symmetric.SymmetricSpace()):
        torch.ones(8)
    assert plain.tracks[0].symmetric_offset == -1


def test_made_symmetric_tracks_unwritten_memory_replacing_an_address_entry_then_a_mark():
    native = FakeNative()
    capture = _op_capture.OpCapture(native, symmetric=_symmetric.SymmetricSpace())
    with capture:
        t = torch.empty(16)  # an earlier tensor at the address symm_mem.empty's one has now
    capture.made_symmetric(t)
    assert [buffer for buffer, _ in native.freed] == [1]
    label, address, size, written_by, place = short(native.tracks[-1])
    assert label.startswith("symm_mem.empty(16,)")
    assert (address, size, written_by, place) == (t.data_ptr(), 64, -1, -1)
    capture.became_symmetric(t, 2 * MiB)  # its rendezvous
    assert native.tracks[-1].symmetric_offset == 2 * MiB
    with capture:
        t.sum()  # read: the symm_mem.empty entry, unwritten (its mark is no memory of ops)
    assert native.log[-1]["reads"][0][0] == 2


def test_a_registered_tensor_gets_one_mark_at_its_place_and_ops_keep_its_own_entry():
    native = FakeNative()
    space = _symmetric.SymmetricSpace()
    capture = _op_capture.OpCapture(native, symmetric=space)
    with capture:
        t = torch.ones(16)  # made before its window was registered: ordinary memory
    capture.became_symmetric(t, 4096)
    capture.became_symmetric(t, 4096)  # a second rendezvous of the same memory: no new mark
    marks = [short(tr) for tr in native.tracks if tr.symmetric_offset != -1]
    assert len(marks) == 1
    label, address, size, written_by, place = marks[0]
    assert label == "symmetric memory (64 bytes) registered"  # " at <caller>" cut by short()
    assert (address, size, place) == (t.data_ptr(), 64, 4096)
    assert native.log[written_by]["kind"] == "host"  # written by the registration: no poison
    with capture:
        t.sum()
    assert native.log[-1]["reads"][0][0] == 1  # the tensor's own entry
    # A tensor made in a registered window is logged at its place once, with no mark.
    space.add_window(0x100000, 1 << 48)
    with capture:
        u = torch.ones(4)
    capture.became_symmetric(u, 99)
    assert [tr.symmetric_offset for tr in native.tracks if tr.address == u.data_ptr()] == [
        u.data_ptr() - 0x100000]

"""cprr._symmetric: torch's symmetric windows as the layout check sees them, on CPU (torch 1.13 in
CI has no torch.distributed._symmetric_memory, so its calls are stand-ins here; the GPU run,
tools/device/run_gpu_checks.sh pysymmetric, drives torch's own).

A window's start is the sum of the sizes of the windows that appeared before it; a tensor's
place is its window's start plus its offset in the window. The op capture logs a tensor made
in a window at that place (native.track's symmetric_offset) and symm_mem.empty's tensors as
unwritten memory there.
"""

import contextlib

import torch

from cprr import _op_capture, _symmetric

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


def test_pool_segments_are_read_again_only_inside_a_symmetric_pool():
    space = _symmetric.SymmetricSpace()
    pool = FakePool((0x100000, 2 * MiB))
    space.add_pool(pool)
    assert space.place(0x100000 + 256) == 256
    pool.segments.append((0x800000, 2 * MiB))  # a segment the pool made later
    looks = pool.looks
    assert space.place(0x800000) is None  # outside use_mem_pool: an ordinary tensor
    assert pool.looks == looks
    with space.allocating():
        assert space.place(0x800000 + 8) == 2 * MiB + 8
    assert pool.looks == looks + 1
    assert not space.pooling()


def test_several_new_segments_at_once_are_ordered_by_address():
    space = _symmetric.SymmetricSpace()
    space.add_pool(FakePool((0x900000, MiB), (0x100000, MiB)))
    assert space.place(0x100000) == 0
    assert space.place(0x900000) == MiB


def test_use_mem_pool_marks_allocation_from_a_symmetric_pool_only():
    space = _symmetric.SymmetricSpace()
    symmetric, other = FakePool(), FakePool()
    space.add_pool(symmetric)
    entered = []

    @contextlib.contextmanager
    def original(pool, device=None):
        entered.append(pool)
        yield

    use_mem_pool = _symmetric._wrap_use_mem_pool(space, original)
    with use_mem_pool(symmetric):
        assert space.pooling()
        with use_mem_pool(other):
            assert space.pooling()  # still inside the symmetric one
    assert not space.pooling()
    with use_mem_pool(other):
        assert not space.pooling()
    assert entered == [symmetric, other, other]


class Recorder:
    def __init__(self):
        self.made = []

    def made_symmetric(self, t, place):
        self.made.append((t, place))


def test_symm_mem_empty_adds_a_window_and_tells_the_running_case():
    space = _symmetric.SymmetricSpace()
    space.add_window(0x10, 64)
    capture = Recorder()
    empty = _symmetric._wrap_empty(space, lambda *size, **kw: torch.empty(*size, **kw),
                                   lambda: capture)
    t = empty(16, dtype=torch.float32)
    assert capture.made == [(t, 64)]
    assert space.place(t.data_ptr() + 4) == 68
    # Outside a case the window is still added (its order counts for later cases).
    outside = _symmetric._wrap_empty(space, lambda *size, **kw: torch.empty(*size, **kw),
                                     lambda: None)
    u = outside(4)
    assert space.place(u.data_ptr()) == 64 + 64


def test_get_mem_pool_under_cprrs_allocator_says_how_to_run_it():
    space = _symmetric.SymmetricSpace()

    def failing(device):
        raise RuntimeError("CUDAPluggableAllocator does not yet support beginAllocateToPool")

    get = _symmetric._wrap_get_mem_pool(space, failing, lambda: True)
    try:
        get("cuda:0")
        raise AssertionError("no error")
    except RuntimeError as e:
        assert "CPRR_TORCH_ALLOCATOR=off" in str(e)
        assert "beginAllocateToPool" in str(e)
    plain = _symmetric._wrap_get_mem_pool(space, failing, lambda: False)
    try:
        plain("cuda:0")
        raise AssertionError("no error")
    except RuntimeError as e:
        assert "CPRR_TORCH_ALLOCATOR" not in str(e)
    pool = FakePool((0x4000, MiB))
    assert _symmetric._wrap_get_mem_pool(space, lambda d: pool, lambda: False)("cuda:0") is pool
    assert space.is_symmetric_pool(pool)
    assert space.place(0x4000) == 0


def test_install_without_torchs_symmetric_memory_is_none_or_a_space():
    space = _symmetric.install(lambda: None, lambda: False)
    try:
        import torch.distributed._symmetric_memory  # noqa: F401
    except ImportError:
        assert space is None
    else:
        assert isinstance(space, _symmetric.SymmetricSpace)


# ---- the op capture logs symmetric tensors at their place ---------------------------------


class FakeNative:
    def __init__(self):
        self.tracks = []  # (label, address, size, written_by, symmetric_offset)
        self.freed = []
        self.log = []

    def track(self, label, address, size, is_cuda, stream, written_by, symmetric_offset=-1):
        self.tracks.append((label.split(" at ")[0], address, size, written_by, symmetric_offset))
        return len(self.tracks)

    def untrack(self, buffer, stream):
        self.freed.append(buffer)

    def library_op(self, kind, name, stream, handle, reads, writes):
        self.log.append((kind, name, list(reads), list(writes)))
        return len(self.log) - 1, False

    def library_order(self, *args):
        pass


def test_a_tensor_made_in_a_window_is_tracked_at_its_place_and_found_memory_at_its_address():
    space = _symmetric.SymmetricSpace()
    space.add_window(0x10, 4096)
    space.add_window(0x100000, 1 << 48)  # every heap address here: each new tensor is in it
    before = torch.zeros(4)
    native = FakeNative()
    with _op_capture.OpCapture(native, symmetric=space):
        a = torch.ones(8)
        before.add_(1)
    assert native.tracks[0][:4] == ("torch.ones(8,)", a.data_ptr(), 32, 0)
    assert native.tracks[0][4] == 4096 + a.data_ptr() - 0x100000
    # Memory from before the case is found at its first use, at its address: only what the case
    # makes is compared across ranks, in the order it was made.
    assert native.tracks[1][0].startswith("cpu tensor memory")
    assert native.tracks[1][4] == -1
    plain = FakeNative()
    with _op_capture.OpCapture(plain, symmetric=_symmetric.SymmetricSpace()):
        torch.ones(8)
    assert plain.tracks[0][4] == -1


def test_made_symmetric_tracks_unwritten_memory_at_its_place_replacing_an_address_entry():
    native = FakeNative()
    capture = _op_capture.OpCapture(native, symmetric=_symmetric.SymmetricSpace())
    with capture:
        t = torch.empty(16)  # symm_mem.empty's own making, seen as an op
    capture.made_symmetric(t, 2 * MiB)
    assert native.freed == [1]
    label, address, size, written_by, place = native.tracks[-1]
    assert label.startswith("symm_mem.empty(16,)")
    assert (address, size, written_by, place) == (t.data_ptr(), 64, -1, 2 * MiB)
    with capture:
        t.sum()  # read: the buffer the window's entry names
    assert native.log[-1][2][0][0] == 2  # the symm_mem.empty entry, not the address one

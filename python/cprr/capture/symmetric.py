"""torch's symmetric memory (torch.distributed._symmetric_memory) in cprr's layout check.

NCCL's symmetric kernels find a peer's copy of a buffer at this rank's offset of it in the same
window, the windows being paired across ranks by the order in which they were registered. So a
symmetric tensor's place is its window's start in the rank's windows laid end to end in the
order they were registered, plus its offset in the window. The op capture logs each symmetric
tensor of a case at that place (pool "torch_symmetric"), and the layout check compares the k-th
one across ranks, as it does cprr's own window (ctx.symmetric_empty; analysis/layout_check.h).
Seed 002 in PyTorch's terms: the caching allocator puts "the same" tensor into another
registered window, or elsewhere in one, on another rank.

Windows, as torch 2.11 makes them (NCCLSymmetricMemory; tools/device/probe_symm_mem.py shows
it on the GPU machine): an allocation of symm_mem.empty's or a segment of the pool
symm_mem.get_mem_pool hands out, registered by the first symm_mem.rendezvous on a tensor in it
(before that it is ordinary memory to NCCL: no symmetric kernel reads it). The space lives as
long as the rank process: registered segments outlive cases.
"""

import bisect
import contextlib
import functools

from cprr.capture.tensor_table import storage_bytes
from cprr.capture.where import caller

_NO_WINDOW = (float("inf"),)


class SymmetricSpace:
    """The rank's symmetric windows, in the order they were registered (see the module's text)."""

    def __init__(self):
        self._windows = []  # (base, size, start), sorted by base
        self._end = 0  # where the next window starts
        self._pools = []  # the symmetric pools handed out (torch.cuda.MemPool)

    def add_window(self, base, size):
        """A new window of `size` bytes at `base`: placed after every earlier one. A window it
        overlaps was freed (its address is reused) and is forgotten. Returns its start."""
        self.forget(base, size)
        start = self._end
        bisect.insort(self._windows, (base, size, start))
        self._end += size
        return start

    def forget(self, base, size):
        """Memory at [base, base + size) is a new allocation: no window any more."""
        self._windows = [w for w in self._windows if w[0] + w[1] <= base or base + size <= w[0]]

    def place(self, address):
        """Where `address` is in the rank's windows, or None when it is in none."""
        i = bisect.bisect_right(self._windows, (address,) + _NO_WINDOW) - 1
        if i >= 0:
            base, size, start = self._windows[i]
            if address < base + size:
                return start + address - base
        return None

    def add_pool(self, pool):
        if not any(p is pool for p in self._pools):
            self._pools.append(pool)

    def register(self, address, handle=None):
        """symm_mem.rendezvous on memory at `address`: the allocation holding it becomes a window
        unless it is one (a pool's segment; else what the rendezvous handle says: its size and
        the memory's offset in it, torch's rendezvous passing the tensor's storage, not its data
        pointer). Returns the place, or None when no allocation is known."""
        found = self.place(address)
        if found is not None:
            return found
        for pool in self._pools:
            for s in pool.snapshot():
                if s["address"] <= address < s["address"] + s["total_size"]:
                    return self.add_window(s["address"], s["total_size"]) + address - s["address"]
        size, offset = getattr(handle, "buffer_size", None), getattr(handle, "offset", None)
        if isinstance(size, int) and isinstance(offset, int) and 0 <= offset < size:
            return self.add_window(address - offset, size) + offset
        return None


class CaseMarks:
    """One case's memory in the rank's windows (`space`, a SymmetricSpace; None where torch has
    no symmetric memory), as its op capture logs it into `native` for the layout check: memory
    made in a window is tracked at its place (cprr.capture.tensor_table.TensorTable.track_made);
    memory the case logged at its address before a rendezvous registered its window gets a mark
    there."""

    def __init__(self, native, space):
        self._native = native
        self._space = space
        # memory logged as symmetric in this case (a tensor table key) -> the buffer of its mark
        # (registered), or None where its own entry is at its place
        self._marks = {}

    def placed(self, key):
        """The place of memory at `key` made now (None: in no window), which is logged there."""
        place = self._space.place(key[2]) if self._space is not None else None
        if place is not None:
            self._marks[key] = None
        return place

    def pop(self, key):
        """The memory at `key` went back: its mark's buffer, for the caller to untrack, or None."""
        return self._marks.pop(key, None)

    def registered(self, t, key, place, host):
        """symm_mem.rendezvous registered the window `t`'s memory (at `key`) is in; its storage
        is at `place`. Memory the case logged at its address (made before the registration, or
        before the case) gets a mark there: an allocation no op touches, which the layout check
        compares as the case's next symmetric one. Ops keep naming the memory's own entry."""
        if key in self._marks:
            return  # logged at its place already
        seq = self._native.library_op("host", f"symm_mem.rendezvous at {caller()}", host, 0, [],
                                      [])[0]
        size = storage_bytes(t)
        self._marks[key] = self._native.track(
            f"symmetric memory ({size} bytes) registered at {caller()}", key[2], size,
            t.is_cuda, 0, seq, symmetric_offset=place)


def _torchs_own(capture):
    """A block in which torch does its own work for a call cprr logs itself (its allocations,
    the window registration's kernels and copies): not the case's, so not counted as work
    outside the op log."""
    return capture.in_op() if capture is not None else contextlib.nullcontext()


def _nbytes(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().nbytes()
    return t.numel() * t.element_size()


def _wrap_empty(space, original, capture_of):
    @functools.wraps(original)
    def empty(*args, **kwargs):
        capture = capture_of()
        with _torchs_own(capture):
            t = original(*args, **kwargs)
        space.forget(t.data_ptr(), _nbytes(t))  # a window once a rendezvous registers it
        if capture is not None:
            capture.made_symmetric(t)
        return t

    empty.__cprr_wrapped__ = True
    return empty


def _wrap_rendezvous(space, original, capture_of):
    @functools.wraps(original)
    def rendezvous(tensor, *args, **kwargs):
        capture = capture_of()
        with _torchs_own(capture):
            handle = original(tensor, *args, **kwargs)
        storage = tensor.data_ptr() - tensor.storage_offset() * tensor.element_size()
        place = space.register(storage, handle)
        if capture is not None and place is not None:
            capture.became_symmetric(tensor, place)
        return handle

    rendezvous.__cprr_wrapped__ = True
    return rendezvous


def _wrap_get_mem_pool(space, original, allocator_used, capture_of):
    @functools.wraps(original)
    def get_mem_pool(*args, **kwargs):
        try:
            with _torchs_own(capture_of()):
                pool = original(*args, **kwargs)
        except RuntimeError as e:
            if not allocator_used():
                raise
            raise RuntimeError(
                f"torch's symmetric memory pool failed under cprr's CUDA allocator ({e}): a "
                "torch.cuda.MemPool needs torch's caching allocator. Run with "
                "CPRR_TORCH_ALLOCATOR=off (the layout check still compares the pool's tensors)"
            ) from e
        space.add_pool(pool)
        return pool

    get_mem_pool.__cprr_wrapped__ = True
    return get_mem_pool


def install(capture_of, allocator_used):
    """Wraps torch's symmetric-memory calls a case makes (symm_mem.empty, rendezvous,
    get_mem_pool) so the space follows them; before any case file is imported, so a
    `from ... import` gets the wrapped ones. `capture_of()`: the running case's op capture or
    None; `allocator_used()`: cprr is torch's CUDA allocator. Returns the space, or None where
    torch has no symmetric memory (before 2.5)."""
    try:
        import torch.distributed._symmetric_memory as symm_mem
    except (ImportError, RuntimeError):
        return None
    space = SymmetricSpace()
    wrappers = {
        "empty": lambda f: _wrap_empty(space, f, capture_of),
        "rendezvous": lambda f: _wrap_rendezvous(space, f, capture_of),
        "get_mem_pool": lambda f: _wrap_get_mem_pool(space, f, allocator_used, capture_of),
    }
    for name, wrap in wrappers.items():
        original = getattr(symm_mem, name, None)
        if original is not None and not hasattr(original, "__cprr_wrapped__"):
            setattr(symm_mem, name, wrap(original))
    return space

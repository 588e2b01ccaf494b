"""torch's symmetric memory (torch.distributed._symmetric_memory) in cprr's layout check.

NCCL's symmetric kernels find a peer's copy of a buffer at this rank's offset of it in the same
window: windows are registered in the same order on every rank and laid end to end in a
symmetric address range. So a symmetric tensor's place is its window's start in the rank's
windows laid end to end, in the order they appeared, plus its offset in the window. The op
capture logs each symmetric tensor a case makes at that place (pool "torch_symmetric"), and the
layout check compares the k-th one across ranks, as it does cprr's own window
(ctx.symmetric_empty; analysis/layout_check.h): seed 002 in PyTorch's terms is the caching
allocator placing "the same" tensor in another window, or elsewhere in one, on another rank.

Windows are symm_mem.empty's allocations (one each) and the segments of the pools
symm_mem.get_mem_pool hands out (the caching allocator places tensors in them inside
torch.cuda.use_mem_pool). The space lives as long as the rank process: segments outlive cases.
"""

import bisect
import contextlib
import functools
import threading

_NO_WINDOW = (float("inf"),)


class SymmetricSpace:
    """The rank's symmetric windows, in the order they appeared (see the module's text)."""

    def __init__(self):
        self._windows = []  # (base, size, start), sorted by base
        self._end = 0  # where the next window starts
        self._pools = []  # the symmetric pools handed out (torch.cuda.MemPool)
        self._pooling = threading.local()  # .depth > 0 inside use_mem_pool(a symmetric pool)

    def add_window(self, base, size):
        """A new window of `size` bytes at `base`: placed after every earlier one. A window it
        overlaps was freed (its address is reused) and is forgotten. Returns its start."""
        self._windows = [w for w in self._windows if w[0] + w[1] <= base or base + size <= w[0]]
        start = self._end
        bisect.insort(self._windows, (base, size, start))
        self._end += size
        return start

    def place(self, address):
        """Where `address` is in the rank's windows, or None when it is in none. Inside
        use_mem_pool(a symmetric pool) an address in no known window is in a segment the pool
        made since the last look: the pools' segments are read again."""
        found = self._lookup(address)
        if found is None and self.pooling():
            self.refresh()
            found = self._lookup(address)
        return found

    def _lookup(self, address):
        i = bisect.bisect_right(self._windows, (address,) + _NO_WINDOW) - 1
        if i >= 0:
            base, size, start = self._windows[i]
            if address < base + size:
                return start + address - base
        return None

    def refresh(self):
        """The pools' segments not yet known become windows (several new at once: by address,
        as no finer order is known)."""
        for pool in self._pools:
            new = [(s["address"], s["total_size"]) for s in pool.snapshot()
                   if self._lookup(s["address"]) is None]
            for base, size in sorted(new):
                self.add_window(base, size)

    def add_pool(self, pool):
        if not any(p is pool for p in self._pools):
            self._pools.append(pool)
            self.refresh()

    def is_symmetric_pool(self, pool):
        return any(p is pool for p in self._pools)

    def pooling(self):
        return getattr(self._pooling, "depth", 0) > 0

    @contextlib.contextmanager
    def allocating(self):
        """The block allocates from a symmetric pool."""
        self._pooling.depth = getattr(self._pooling, "depth", 0) + 1
        try:
            yield
        finally:
            self._pooling.depth -= 1


def _nbytes(t):
    return t.untyped_storage().nbytes() if hasattr(t, "untyped_storage") else t.numel() * t.element_size()


def _wrap_empty(space, original, capture_of):
    @functools.wraps(original)
    def empty(*args, **kwargs):
        t = original(*args, **kwargs)
        place = space.add_window(t.data_ptr(), _nbytes(t))
        capture = capture_of()
        if capture is not None:
            capture.made_symmetric(t, place)
        return t

    empty.__cprr_wrapped__ = True
    return empty


def _wrap_get_mem_pool(space, original, allocator_used):
    @functools.wraps(original)
    def get_mem_pool(*args, **kwargs):
        try:
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


def _wrap_use_mem_pool(space, original):
    @functools.wraps(original)
    @contextlib.contextmanager
    def use_mem_pool(pool, *args, **kwargs):
        with original(pool, *args, **kwargs):
            if space.is_symmetric_pool(pool):
                with space.allocating():
                    yield
            else:
                yield

    use_mem_pool.__cprr_wrapped__ = True
    return use_mem_pool


def _wrap_register_mem_pool(space, torch):
    """ProcessGroupNCCL.register_mem_pool(pool, symm=True) makes a pool's segments NCCL's
    symmetric windows (seed 002's own set-up, without torch's symmetric-memory module)."""
    group = getattr(torch.distributed, "ProcessGroupNCCL", None)
    original = getattr(group, "register_mem_pool", None)
    if original is None or hasattr(original, "__cprr_wrapped__"):
        return

    @functools.wraps(original)
    def register_mem_pool(self, pool, *args, **kwargs):
        original(self, pool, *args, **kwargs)
        symm = kwargs.get("symm", args[0] if args else False)
        if symm and hasattr(pool, "snapshot"):
            space.add_pool(pool)

    register_mem_pool.__cprr_wrapped__ = True
    try:
        group.register_mem_pool = register_mem_pool
    except (AttributeError, TypeError):  # a binding whose class takes no new attributes
        pass


def install(capture_of, allocator_used):
    """Wraps torch's symmetric-memory calls a case makes (symm_mem.empty, symm_mem.get_mem_pool,
    torch.cuda.use_mem_pool) so the space follows them; before any case file is imported, so a
    `from ... import` gets the wrapped ones. `capture_of()`: the running case's op capture or
    None; `allocator_used()`: cprr is torch's CUDA allocator. Returns the space, or None where
    torch has no symmetric memory (before 2.5; CPU-only builds)."""
    try:
        import torch
        import torch.distributed._symmetric_memory as symm_mem
    except (ImportError, RuntimeError):
        return None
    space = SymmetricSpace()
    if hasattr(symm_mem, "empty") and not hasattr(symm_mem.empty, "__cprr_wrapped__"):
        symm_mem.empty = _wrap_empty(space, symm_mem.empty, capture_of)
    if hasattr(symm_mem, "get_mem_pool") and not hasattr(symm_mem.get_mem_pool, "__cprr_wrapped__"):
        symm_mem.get_mem_pool = _wrap_get_mem_pool(space, symm_mem.get_mem_pool, allocator_used)
    _wrap_register_mem_pool(space, torch)
    memory = getattr(torch.cuda, "memory", None)
    original = getattr(memory, "use_mem_pool", None)
    if original is not None and not hasattr(original, "__cprr_wrapped__"):
        wrapped = _wrap_use_mem_pool(space, original)
        memory.use_mem_pool = wrapped
        if getattr(torch.cuda, "use_mem_pool", None) is original:
            torch.cuda.use_mem_pool = wrapped
    return space

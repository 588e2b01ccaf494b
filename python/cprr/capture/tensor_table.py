"""The case's tensor memory as its op log knows it (torch's CUDA sanitizer's _TensorsAccessed).

Every tensor's storage the case makes or touches is one entry, by (device type, device index,
storage address): a buffer of the allocation log (pool "tensor", its address as the offset), so
the race check sees two tensors at one address (memory freed and reused) as the same bytes. An
op names the bytes it touches as (buffer, byte offset, bytes). Memory the case did not make (from
before the case, a module's buffer, made past the dispatcher) gets an entry at its first use.
"""

from cprr.capture.where import caller


def key_of(t):
    """The table's key of a tensor's memory: its storage's device and address."""
    base = t.data_ptr() - t.storage_offset() * t.element_size()
    return (t.device.type, t.device.index, base)


def extent(t):
    """Bytes from the tensor's first element to past its last, as laid out in its storage."""
    if t.numel() == 0:
        return 0
    last = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


# A view with more contiguous runs than this is logged as its whole extent: an op's log entry
# stays small, at the price of naming bytes between the runs (strided reads that fine are rare).
MAX_RUNS = 64


def runs(t):
    """(byte offset in its storage, bytes) of each contiguous run of the tensor's elements, in
    address order, runs that touch or overlap merged: ``rows[:, :2]`` of a 4 x 8 matrix is four
    runs of two elements, not the 26 elements from its first to its last. A tensor of more than
    MAX_RUNS runs is its whole extent."""
    item, start = t.element_size(), t.storage_offset()
    # The dimensions that move through memory, innermost first; the leading ones laid end to end
    # make one run.
    dims = sorted((abs(stride), size) for size, stride in zip(t.shape, t.stride())
                  if size > 1 and stride != 0)
    run, i = 1, 0
    while i < len(dims) and dims[i][0] == run:
        run *= dims[i][1]
        i += 1
    outer = dims[i:]
    count = 1
    for _, size in outer:
        count *= size
    if count > MAX_RUNS:
        return [(start * item, extent(t))]
    starts = [0]
    for stride, size in outer:
        starts = [s + k * stride for s in starts for k in range(size)]
    merged = []
    for s in sorted(starts):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], s + run)
        else:
            merged.append([s, s + run])
    return [((start + a) * item, (b - a) * item) for a, b in merged]


def storage_bytes(t):
    """The bytes of the tensor's whole storage (torch 2.x: untyped_storage; 1.13: storage)."""
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.nbytes()


class Entry:
    """A tracked tensor memory: its buffer id, the stream that made it, the other streams
    record_stream said use it (the caching allocator reuses its memory only after them), and its
    bytes (None: not known, as for a stand-in in tests)."""

    __slots__ = ("buffer", "stream", "uses", "size")

    def __init__(self, buffer, stream, size=None):
        self.buffer = buffer
        self.stream = stream
        self.uses = set()
        self.size = size

    def used_on(self, stream):
        """`stream` uses the memory (record_stream): its reuse waits for it."""
        if stream != self.stream:
            self.uses.add(stream)


class TensorTable:
    """One case's tracked tensor memory, logged into `native` (the case's native context).
    `order`: where work runs (cprr.capture.stream_order.StreamOrder); `marks`: the memory in torch's
    symmetric windows (cprr.capture.symmetric.CaseMarks), logged at its place there."""

    def __init__(self, native, order, marks):
        self._native = native
        self._order = order
        self._marks = marks
        self._entries = {}  # key_of(tensor) -> Entry

    def get(self, key):
        return self._entries.get(key)

    def __setitem__(self, key, entry):
        self._entries[key] = entry

    def __contains__(self, key):
        return key in self._entries

    def values(self):
        return self._entries.values()

    def touches(self, tensors):
        """(buffer, byte offset, bytes) of each contiguous run of each tensor (runs), a tensor
        never seen before included."""
        out = []
        for t in tensors:
            if t.numel() == 0 or t.is_sparse or getattr(t, "is_sparse_csr", False):  # no storage
                continue
            key = key_of(t)
            entry = self._entries.get(key)
            offset, span = t.storage_offset() * t.element_size(), extent(t)
            # Past a tracked host tensor's end: its memory went back unseen (host memory has no
            # free hook) and a bigger tensor made past the dispatcher has the address now.
            if entry is None or (entry.size is not None and offset + span > entry.size
                                 and t.device.type == "cpu"):
                if t.device.type not in ("cpu", "cuda"):
                    continue
                entry = self._found(t, key)
            if t.is_contiguous():
                out.append((entry.buffer, offset, span))
            else:
                out += [(entry.buffer, o, n) for o, n in runs(t)]
        return out

    def _found(self, t, key):
        """A tensor whose making the capture did not see (made before the case, a module's
        buffer, or past the dispatcher): tracked from its first use on, as memory the host wrote
        before that use, so neither check blames the case for what came before it."""
        size = storage_bytes(t)
        what = f"{t.device.type} tensor memory ({size} bytes) from before the case"
        seq = self._native.library_op("host", f"{what}, first used at {caller()}",
                                      self._order.host, 0, [], [])[0]
        return self.track_found(t, key, what, size, seq)

    def track_found(self, t, key, what, size, seq):
        """Tracks memory made past the dispatcher, whole, as written by op `seq`."""
        buffer = self._native.track(what, key[2], size, t.is_cuda, 0, seq)
        entry = self._entries[key] = Entry(buffer, self._order.stream_of(t.device)[0], size)
        return entry

    def track_made(self, t, key, label, handle, written_by, stream):
        """Tracks the tensor an op made on `stream` (cudaStream_t `handle`), written by op
        `written_by` (-1: nobody, the empty family), at its place when it is in a symmetric
        window. Only a host tensor's size is kept (touches): a device one's free is seen."""
        size = extent(t) + t.storage_offset() * t.element_size()
        place = self._marks.placed(key)
        if place is None:
            buffer = self._native.track(label, key[2], size, t.is_cuda, handle, written_by)
        else:
            buffer = self._native.track(label, key[2], size, t.is_cuda, handle, written_by,
                                        symmetric_offset=place)
        self._entries[key] = Entry(buffer, stream, None if t.is_cuda else storage_bytes(t))

    def track_unwritten(self, t, label):
        """A tensor made past the dispatcher that nothing wrote (symm_mem.empty's): an entry at
        its address before is of memory that went back unseen."""
        key = key_of(t)
        self.forget(key)
        stream, handle = self._order.stream_of(t.device)
        size = storage_bytes(t)
        buffer = self._native.track(label, key[2], size, t.is_cuda, handle, -1)
        self._entries[key] = Entry(buffer, stream, None if t.is_cuda else size)

    def adopt(self, tensor, buffer):
        """`tensor` is over cprr's allocation `buffer` (ctx.symmetric_empty): its ops are logged
        against that allocation."""
        self._entries[key_of(tensor)] = Entry(buffer, self._order.stream_of(tensor.device)[0],
                                              storage_bytes(tensor))

    def used_by(self, tensors, stream):
        """`stream` uses these tensors as record_stream would say (an async collective's). A host
        tensor's memory is held by the call's Work until the call is done, so it too comes back
        only after its uses (host_reused)."""
        for t in tensors:
            entry = self._entries.get(key_of(t))
            if entry is not None:
                entry.used_on(stream)

    def host_reused(self, key):
        """Host memory tracked at `key` is handed out again (its free is not seen): the async
        calls that used it held it until done (used_by), so the reuse comes after them: logged
        now, before what the new tensor's maker writes. Returns whether it logged a wait."""
        entry = self._entries.get(key)
        if entry is None or not entry.uses:
            return False
        self._order.reuse_after_uses(entry)
        entry.uses.clear()
        return True

    def forget(self, key, reused=False):
        """The memory at `key` went back to its allocator: its entry (and its symmetric mark) are
        logged as freed. `reused`: the caching allocator took it back, and hands it out again
        only after the streams record_stream named (cprr.capture.stream_order.StreamOrder)."""
        entry = self._entries.pop(key, None)
        mark = self._marks.pop(key)
        if entry is None:
            return
        if mark is not None:
            self._native.untrack(mark, entry.stream)
        if reused:
            self._order.reuse_after_uses(entry)
        self._native.untrack(entry.buffer, entry.stream)

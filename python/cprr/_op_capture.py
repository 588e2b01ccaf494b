"""A case's torch ops in cprr's op log, each on the stream it runs on (torch 1.13 and 2.x).

A TorchDispatchMode (what PyTorch's CUDA sanitizer uses) sees every aten op the case body runs.
Each op that touches a tensor of the case, or makes one, becomes one op of the op log:

- on its stream: the current CUDA stream of its device (op-log stream 0 is the legacy default
  stream, others are numbered as they appear), or the host (-1 on the cuda backend, where CPU
  tensors, pinned buffers among them, are written by the host thread; 0 on the cpu backend, where
  every op runs on the host in order);
- with the bytes it reads and writes of each tensor's memory: every tensor argument that does not
  alias is read (a view reads nothing), every mutable argument (``out=``, an in-place op's
  `self`) is written, and read too when the op is arithmetic (``acc += x`` reads acc); a view as
  the bytes it spans; a tensor the op makes is written whole by it, except one from
  ``torch.empty`` and its family, which nothing wrote;
- a copy between host and device that is not ``non_blocking`` (and ``.item()``) is followed by the
  host waiting for the stream, as torch does.

Every tensor the case makes is in the allocation log (pool "tensor", its address as the offset),
so the race check sees two tensors at one address (memory freed and reused) as the same bytes.
Events, stream waits and synchronizations come from torch's CUDA trace hooks (cprr._gpu_hooks),
collectives from cprr._collectives. What the dispatcher does not see is counted, never ignored:
see `outside`.
"""

import functools
import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_EMPTY = {"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"}
# In-place ops whose result depends on the bytes they overwrite.
_READ_MODIFY = {
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "addcmul", "addcdiv", "addmm",
    "addmv", "addbmm", "baddbmm", "addr", "lerp", "pow", "clamp", "clamp_min", "clamp_max",
    "clip", "neg", "abs", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt",
    "sigmoid", "tanh", "relu", "gelu", "silu", "floor", "ceil", "round", "trunc", "frac", "sign",
    "reciprocal", "fmod", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "logical_and", "logical_or", "logical_xor", "logical_not", "square", "sin", "cos", "erf",
    "hardtanh", "leaky_relu", "elu", "threshold", "nan_to_num", "cumsum", "cumprod",
    "exponential", "mvlgamma", "atan2", "hypot", "logit", "xlogy", "copysign", "lt", "le", "gt",
    "ge", "eq", "ne", "maximum", "minimum",
}
# Ops that move bytes between host and device memory when their tensors are on both.
_COPIES = {"copy_", "_to_copy", "to", "_copy_from", "_copy_from_and_resize"}
# What torch.tensor(data) runs after building its tensor past the dispatcher.
_LIFTS = {"lift_fresh", "lift", "lift_fresh_copy"}
# _cprr.NO_NATIVE_STREAM: a stream the capture models with no cudaStream_t behind it.
NO_NATIVE_STREAM = (1 << 64) - 1
_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))


@functools.lru_cache(maxsize=4096)
def _inside(filename):
    """Whether a frame of this file is torch's or cprr's own (not the case's code)."""
    f = os.path.abspath(filename)
    return f.startswith((_HERE, _TORCH)) or "importlib" in f or filename.startswith("<")


def _caller():
    """file:line of the case code that made the call (the first frame outside torch and cprr)."""
    frame = sys._getframe(1)
    while frame is not None:
        if not _inside(frame.f_code.co_filename):
            return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def _extent(t):
    """Bytes from the tensor's first element to past its last, as laid out in its storage."""
    if t.numel() == 0:
        return 0
    last = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


def _storage_bytes(t):
    """The bytes of the tensor's whole storage (torch 2.x: untyped_storage; 1.13: storage)."""
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.nbytes()


def _key(t):
    base = t.data_ptr() - t.storage_offset() * t.element_size()
    return (t.device.type, t.device.index, base)


def _native_stream(stream):
    """The cudaStream_t of a torch stream argument (a torch.cuda.Stream, or the device-generic
    torch.Stream an aten op receives in torch 2.x)."""
    handle = getattr(stream, "cuda_stream", None)
    if handle is not None:
        return handle
    return torch.cuda.Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                             device_type=stream.device_type).cuda_stream


def _current_raw_stream(index):
    """The cudaStream_t of the device's current stream (without making a Stream object)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(index)
    return torch.cuda.current_stream(index).cuda_stream


class Streams:
    """One case's CUDA streams and events as op-log numbers: stream 0 is the legacy default
    stream (handle 0), others are numbered as they first appear; events likewise from 0. Numbers
    no handle has (new_stream, new_event) are for orderings cprr models itself."""

    def __init__(self):
        self._streams = {0: 0}
        self._events = {}
        self._next_stream = 1
        self._next_event = 0

    def stream(self, handle):
        number = self._streams.get(handle)
        if number is None:
            number = self._streams[handle] = self.new_stream()
        return number

    def new_stream(self):
        self._next_stream += 1
        return self._next_stream - 1

    def event(self, handle):
        number = self._events.get(handle)
        if number is None:
            number = self._events[handle] = self.new_event()
        return number

    def forget_event(self, handle):
        """The event was destroyed: a new one may get its handle, and is another event."""
        self._events.pop(handle, None)

    def new_event(self):
        self._next_event += 1
        return self._next_event - 1


class _Tensor:
    """A tracked tensor memory: its buffer id, the stream that made it, the other streams
    record_stream said use it (the caching allocator reuses its memory only after them), and its
    bytes (None: not known, as for a stand-in in tests)."""

    __slots__ = ("buffer", "stream", "uses", "size")

    def __init__(self, buffer, stream, size=None):
        self.buffer = buffer
        self.stream = stream
        self.uses = set()
        self.size = size


class OpCapture(TorchDispatchMode):
    """Active while a case body runs (worker._body); one per case execution. `device_backend`:
    the world runs on a device backend (cuda), so CPU tensors are the host's. `counter`: what
    counts CUDA work outside the op log (the _cprr module's seen_enter/seen_leave), told when
    torch runs work this capture logs; None where nothing counts."""

    def __init__(self, native, device_backend=False, counter=None, allocator=False,
                 symmetric=None):
        super().__init__()
        self._native = native
        # torch's symmetric windows (cprr._symmetric.SymmetricSpace; None: torch has none): a
        # tensor made in one is logged at its place there, for the layout check.
        self._symmetric = symmetric
        # memory logged as symmetric in this case -> the buffer of its mark (became_symmetric),
        # or None where its own entry is at its place
        self._symmetric_marks = {}
        self._counter = counter
        # cprr's arena is torch's CUDA allocator (worker._use_cprr_allocator): it reports frees
        # (torch's trace hooks do not) and is told of record_stream.
        self._allocator = allocator
        self._device_index = getattr(native, "device_index", -1)
        self.host = -1 if device_backend else 0
        self.streams = Streams()
        self._tracked = {}  # (device type, index, storage address) -> _Tensor
        self._pinned_uses = {}  # pinned host memory -> events of the non_blocking copies using it
        self._in_op = 0  # > 0 while torch runs an op this capture logged (or a collective)
        self.outside = {}  # what the case did that the op log cannot see -> how many times
        self._pending = {}  # the same since the last op, until that op is seen (see _op_begins)

    # ---- tensors the case's other calls (captures, collectives, symmetric memory) touch ------

    def touches(self, tensors):
        """(buffer, byte offset, bytes) of each tensor, a tensor never seen before included."""
        out = []
        for t in tensors:
            if t.numel() == 0:
                continue
            key = _key(t)
            tracked = self._tracked.get(key)
            offset, extent = t.storage_offset() * t.element_size(), _extent(t)
            # Past a tracked host tensor's end: its memory went back unseen (host memory has no
            # free hook) and a bigger tensor made past the dispatcher has the address now.
            if tracked is None or (tracked.size is not None and offset + extent > tracked.size
                                   and t.device.type == "cpu"):
                if t.device.type not in ("cpu", "cuda"):
                    continue
                tracked = self._found(t, key)
            out.append((tracked.buffer, offset, extent))
        return out

    def _found(self, t, key):
        """A tensor whose making the capture did not see (made before the case, a module's
        buffer, or past the dispatcher): tracked from its first use on, as memory the host wrote
        before that use, so neither check blames the case for what came before it."""
        size = _storage_bytes(t)
        what = f"{t.device.type} tensor memory ({size} bytes) from before the case"
        seq = self._native.library_op("host", f"{what}, first used at {_caller()}", self.host, 0,
                                      [], [])[0]
        return self._track_found(t, key, what, size, seq)

    def _track_found(self, t, key, what, size, seq):
        buffer = self._native.track(what, key[2], size, t.is_cuda, 0, seq)
        tracked = self._tracked[key] = _Tensor(buffer, self.stream_of(t.device)[0], size)
        return tracked

    def _track(self, label, key, size, is_cuda, handle, written_by, place=None):
        """native.track, at the memory's place in torch's symmetric windows when it is in one."""
        if place is None and self._symmetric is not None:
            place = self._symmetric.place(key[2])
        if place is None:
            return self._native.track(label, key[2], size, is_cuda, handle, written_by)
        self._symmetric_marks[key] = None
        return self._native.track(label, key[2], size, is_cuda, handle, written_by,
                                  symmetric_offset=place)

    def made_symmetric(self, t):
        """torch's symm_mem.empty made `t` past the dispatcher: unwritten memory of the case (its
        window comes with its rendezvous, became_symmetric). A tensor tracked at its address
        before is gone: logged as freed."""
        key = _key(t)
        self._forget_stale(key)
        stream, handle = self.stream_of(t.device)
        size = _storage_bytes(t)
        buffer = self._native.track(f"symm_mem.empty{tuple(t.shape)} at {_caller()}", key[2],
                                    size, t.is_cuda, handle, -1)
        self._tracked[key] = _Tensor(buffer, stream, None if t.is_cuda else size)

    def _forget_stale(self, key):
        """A tensor made past the dispatcher has the memory at `key`: an entry there is of
        memory that went back unseen, logged as freed."""
        old = self._tracked.pop(key, None)
        mark = self._symmetric_marks.pop(key, None)
        if old is not None:
            if mark is not None:
                self._native.untrack(mark, old.stream)
            self._native.untrack(old.buffer, old.stream)

    def became_symmetric(self, t, place):
        """symm_mem.rendezvous registered the window `t`'s memory is in; its storage is at
        `place` in the rank's windows. Memory the case logged at its address (made before the
        registration, or before the case) gets a mark there: an allocation no op touches,
        which the layout check compares as the case's next symmetric one. Ops keep naming the
        memory's own entry."""
        key = _key(t)
        if key in self._symmetric_marks:
            return  # logged at its place already
        seq = self._native.library_op("host", f"symm_mem.rendezvous at {_caller()}", self.host,
                                      0, [], [])[0]
        size = _storage_bytes(t)
        self._symmetric_marks[key] = self._native.track(
            f"symmetric memory ({size} bytes) registered at {_caller()}", key[2], size,
            t.is_cuda, 0, seq, symmetric_offset=place)

    def adopt(self, tensor, buffer):
        """`tensor` is over cprr's allocation `buffer` (ctx.symmetric_empty): its ops are logged
        against that allocation."""
        self._tracked[_key(tensor)] = _Tensor(buffer, self.stream_of(tensor.device)[0],
                                              _storage_bytes(tensor))

    def stream_of(self, device):
        """(op-log stream, cudaStream_t) where an op on `device` runs: the device's current
        stream, or the host for None and CPU."""
        if device is None or device.type != "cuda":
            return self.host, 0
        handle = _current_raw_stream(device.index)
        return self.streams.stream(handle), handle

    def note(self, what, reads=(), writes=(), stream=None):
        """Logs a call outside aten (a capture, a collective) that reads/writes these tensors, on
        `stream` (default: where the tensors are, the current stream for CUDA ones)."""
        r, w = self.touches(reads), self.touches(writes)
        if not (r or w):
            return
        if stream is None:
            stream, handle = self.stream_of(device_of(list(reads) + list(writes), {}))
        else:
            handle = NO_NATIVE_STREAM  # a stream cprr models (an async collective's): no delay
        self._native.library_op("kernel" if stream >= 0 else "host", f"{what} at {_caller()}",
                                stream, handle, r, w)

    def used_by(self, tensors, stream):
        """`stream` uses these tensors as record_stream would say (an async collective's)."""
        for t in tensors:
            tracked = self._tracked.get(_key(t)) if t.is_cuda else None
            if tracked is not None and stream != tracked.stream:
                tracked.uses.add(stream)

    def order(self, kind, what, stream, event=-1):
        """An ordering op (record, wait, sync) in the op log."""
        self._native.library_order(kind, what, stream, event)

    def count_outside(self, what):
        """Work the op log cannot see, pending until the next op tells whether it was that op's
        own (see _op_begins)."""
        self._pending[what] = self._pending.get(what, 0) + 1

    def _op_begins(self, plan):
        """torch.tensor(data, device=...) builds and copies its tensor past the dispatcher, then
        runs lift_fresh: what was pending is that constructor's. Else it was outside the op
        log."""
        if self._allocator:
            self._released()
        if plan is not None and plan.name in _LIFTS:
            self._pending.clear()
            if self._counter is not None:
                self._counter.unseen_forgive()
            return
        for what, n in self._pending.items():
            self.outside[what] = self.outside.get(what, 0) + n
        self._pending.clear()

    def finish(self):
        """At the case's end: what is still pending was outside the op log."""
        self._op_begins(None)

    class _InOp:
        def __init__(self, capture):
            self._capture = capture

        def __enter__(self):
            self._capture._enter_op()

        def __exit__(self, *exc):
            self._capture._leave_op()
            return False

    def _enter_op(self):
        self._in_op += 1
        if self._counter is not None:
            self._counter.seen_enter()

    def _leave_op(self):
        self._in_op -= 1
        if self._counter is not None:
            self._counter.seen_leave()

    def in_op(self):
        """Within the block torch runs work this capture logged itself (a collective): what the
        trace hooks report meanwhile is part of it."""
        return OpCapture._InOp(self)

    @property
    def inside_op(self):
        return self._in_op > 0

    # ---- what torch's CUDA trace hooks report (cprr._gpu_hooks) ------------------------------

    def freed(self, device_index, address):
        """The caching allocator took back the memory at `address` of CUDA device `device_index`.
        Streams record_stream named must finish before it is reused: recorded here as the
        allocating stream waiting for each of them, which is how the allocator orders it (it
        hands the memory only to that stream, once their events completed)."""
        key = ("cuda", device_index, address)
        tracked = self._tracked.pop(key, None)
        mark = self._symmetric_marks.pop(key, None)
        if tracked is None:
            return
        if mark is not None:
            self._native.untrack(mark, tracked.stream)
        for use in sorted(tracked.uses):
            event = self.streams.new_event()
            self.order("record", "record_stream: a use the allocator waits for", use, event)
            self.order("wait", "memory reused after its record_stream uses", tracked.stream, event)
        self._native.untrack(tracked.buffer, tracked.stream)

    def _released(self):
        """What cprr's arena took back since the last op (any thread's frees), in order."""
        for address in self._native.torch_released():
            self.freed(self._device_index, address)

    # ---- aten ops ----------------------------------------------------------------------------

    def _record_stream(self, tensor, stream):
        if not tensor.is_cuda:
            return
        handle = _native_stream(stream)
        key = _key(tensor)
        if self._allocator:
            self._native.torch_record_stream(key[2], handle)
        tracked = self._tracked.get(key)
        if tracked is not None:
            use = self.streams.stream(handle)
            if use != tracked.stream:
                tracked.uses.add(use)

    def _accesses(self, plan, args, kwargs):
        """(tensors read, tensors written, every tensor argument)."""
        reads, writes, every = [], [], []
        for role, value in zip(plan.positional, args):
            if role >= 0:
                _add(role, value, reads, writes, every)
        if kwargs:
            for arg, value in kwargs.items():
                role = plan.keyword.get(arg, -1)
                if role >= 0:
                    _add(role, value, reads, writes, every)
        return reads, writes, every

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        plan = _plan(func)
        self._op_begins(plan)
        if plan is None:
            return self._run(func, args, kwargs)  # not aten (c10d's: cprr._collectives)
        if plan.name == "record_stream":
            self._record_stream(args[0], args[1])
            return self._run(func, args, kwargs)
        if plan.name in _LIFTS and args and isinstance(args[0], torch.Tensor):
            self._lifted(args[0])
        reads, writes, every = self._accesses(plan, args, kwargs)
        r, w = self.touches(reads), self.touches(writes)
        if not (r or w or plan.makes):
            return self._run(func, args, kwargs)
        device = device_of(every, kwargs)
        stream, handle = self.stream_of(device)
        copy = stream >= 0 and plan.copy and _crosses(every, kwargs)
        kind = "copy" if copy else ("host" if stream < 0 else "kernel")
        where = _caller()
        seq, sync_after = self._native.library_op(kind, f"aten.{plan.name} at {where}", stream,
                                                  handle, r, w)
        self._enter_op()
        try:
            result = func(*args, **kwargs)
        finally:
            self._leave_op()
        if plan.makes:
            self._made(plan, result, seq, where, stream, handle, every)
        if copy and plan.non_blocking(args, kwargs):
            self._pinned_in_use(every, stream)
        elif copy or (device is not None and plan.name == "_local_scalar_dense"):
            # A blocking copy between host and device, and .item(), return once it is done.
            self.order("sync", f"aten.{plan.name} waits for its stream", stream)
        if sync_after:
            self._native.synchronize_library()
        return result

    def _lifted(self, t):
        """torch.tensor(data) made `t` past the dispatcher, at an address an earlier tensor may
        have had: a new tensor, written by the host (its data) before this op."""
        if t.numel() == 0 or t.device.type not in ("cpu", "cuda"):
            return
        key = _key(t)
        self._forget_stale(key)
        what, size = f"torch.tensor{tuple(t.shape)} at {_caller()}", _storage_bytes(t)
        if t.is_cuda:
            # Its data was copied on the current stream, and the host waited for the copy.
            stream, handle = self.stream_of(t.device)
            seq = self._native.library_op("copy", what, stream, handle, [], [])[0]
            self.order("sync", "torch.tensor waits for its copy", stream)
        else:
            seq = self._native.library_op("host", what, self.host, 0, [], [])[0]
        self._track_found(t, key, what, size, seq)

    def _run(self, func, args, kwargs):
        """An op the dispatcher saw that the log needs no entry for: its CUDA work and memory
        are not work outside the op log."""
        self._enter_op()
        try:
            return func(*args, **kwargs)
        finally:
            self._leave_op()

    def _pinned_in_use(self, tensors, stream):
        """A non_blocking copy reads or writes pinned host memory: torch's host allocator records
        an event on the stream and hands the memory out again only once it completed."""
        for t in tensors:
            if t.device.type == "cpu" and t.is_pinned():
                event = self.streams.new_event()
                self.order("record", "pinned memory used by a non_blocking copy", stream, event)
                self._pinned_uses.setdefault(_key(t), []).append(event)

    def _made(self, plan, result, seq, where, stream, handle, inputs):
        """Tracks the tensors an op made (returns that alias no argument's memory): written by
        it, or by nobody for the empty family. An address tracked before was freed and reused:
        it names another tensor now."""
        values = result if len(plan.returns) > 1 else (result,)
        aliased = None
        for makes, value in zip(plan.returns, values):
            if not makes:
                continue
            for t in _tensors(value):
                if t.numel() == 0 or t.device.type not in ("cpu", "cuda"):
                    continue
                key = _key(t)
                if aliased is None:
                    aliased = {_key(i) for i in inputs}
                if key in aliased:
                    continue  # a view the schema does not call one (_unsafe_view)
                written_by = -1 if plan.name in _EMPTY else seq
                reused = self._pinned_uses.pop(key, None) if stream < 0 else None
                if reused:
                    # Pinned memory handed out again: only after the copies that used it.
                    for event in reused:
                        self.order("wait", "pinned memory reused once its copies are done", -1,
                                   event)
                    if written_by >= 0:
                        written_by = self._native.library_op(
                            "host", f"aten.{plan.name} at {where} (writes the memory reused)",
                            -1, 0, [], [])[0]
                label = f"torch.{plan.name}{tuple(t.shape)} at {where}"
                buffer = self._track(
                    label, key, _extent(t) + t.storage_offset() * t.element_size(), t.is_cuda,
                    handle, written_by)
                # Only a host tensor's size is checked (touches): a device one's free is seen.
                self._tracked[key] = _Tensor(buffer, stream,
                                             None if t.is_cuda else _storage_bytes(t))


def _add(role, value, reads, writes, every):
    tensors = list(_tensors(value))
    every += tensors
    if role & _READ:
        reads += tensors
    if role & _WRITE:
        writes += tensors


_READ, _WRITE = 1, 2


class _Plan:
    """What the capture needs of an aten op's schema, worked out once per op overload: each
    argument's role (-1: no tensor of interest, else a mask of _READ and _WRITE; an aliasing
    argument that is not written, a view's input, is 0), which returns are tensors it makes."""

    def __init__(self, func):
        schema = func._schema
        self.name = func.overloadpacket.__name__
        name = self.name
        metadata_only = name in _EMPTY or name.endswith("_like") or name.startswith("new_")
        read_modify = name.rstrip("_") in _READ_MODIFY
        self.positional, self.keyword = [], {}
        self._non_blocking = None
        for i, arg in enumerate(schema.arguments):
            alias = arg.alias_info
            if alias is not None and alias.is_write:
                role = _WRITE | (_READ if read_modify and not arg.kwarg_only else 0)
            elif alias is None and not metadata_only:
                role = _READ
            else:
                role = 0
            if arg.kwarg_only:
                self.keyword[arg.name] = role
            else:
                self.positional.append(role)
            if arg.name == "non_blocking":
                self._non_blocking = (None if arg.kwarg_only else i, arg.name)
        self.returns = [r.alias_info is None and "Tensor" in str(r.type) for r in schema.returns]
        self.makes = any(self.returns)
        self.copy = name in _COPIES

    def non_blocking(self, args, kwargs):
        if self._non_blocking is None:
            return False
        index, name = self._non_blocking
        if name in kwargs:
            return bool(kwargs[name])
        return index is not None and index < len(args) and bool(args[index])


@functools.lru_cache(maxsize=None)
def _plan(func):
    """The op's _Plan; None for an op that is not aten's."""
    return _Plan(func) if func._schema.name.startswith("aten::") else None


def device_of(tensors, kwargs):
    """The CUDA device an op runs on (its first CUDA tensor's, else its device= argument's), or
    None for an op of the host."""
    for t in tensors:
        if t.is_cuda:
            return t.device
    device = kwargs.get("device")
    if device is not None:
        device = torch.device(device)
        if device.type == "cuda":
            return device if device.index is not None else torch.device(
                "cuda", torch.cuda.current_device())
    return None


def _crosses(tensors, kwargs):
    """Whether an op moves bytes between host and device memory."""
    types = {t.device.type for t in tensors}
    device = kwargs.get("device")
    if device is not None:
        types.add(torch.device(device).type)
    return "cuda" in types and "cpu" in types


class Idle:
    """A native side that records nothing (what warm_up's capture reports to, and a profile's):
    every call the capture and the collectives make, answered with increasing numbers."""

    def __init__(self):
        self._next = 0

    def _number(self):
        self._next += 1
        return self._next - 1

    def track(self, *args, **kwargs):
        return self._number()

    def library_op(self, *args):
        return self._number(), False

    def enter_collective(self, *args):
        return self._number()

    def library_order(self, *args):
        pass

    def torch_released(self):
        return []

    untrack = complete_collective = note_p2p = note_unseen = torch_record_stream = library_order


def warm_up():
    """Runs a few CPU ops under an OpCapture once, before any case: the first use of a dispatch
    mode makes torch 2.x import torch._dynamo, sympy and more (measured 5-6 s on the GPU machine,
    where they have no bytecode cache), which would otherwise land in the first case of every
    rank. The template process pays it once for every rank it forks; a spawned rank before its
    hello, where standby hides it. Touches no GPU."""
    with OpCapture(Idle()):
        a = torch.empty(4)
        a.fill_(1.0)
        a += torch.ones(4)
        a.sum()

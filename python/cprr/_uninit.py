"""Reads of tensor bytes nothing wrote, seen through a TorchDispatchMode (torch 1.13 and 2.x).

Every tensor a case gets from ``torch.empty`` (and ``empty_like``, ``new_empty``,
``empty_strided``) is tracked: it is logged in the case's allocation log (pool "tensor") and every
aten op that reads or writes its bytes is logged in the op log with the byte span it touches
(a view as the bytes it spans). cprr's uninitialized-read check then finds a read of bytes no op
wrote since the allocation, exactly as for C++ cases, and a replay that poisons fills these
tensors with its pattern to confirm it. Tensors made any other way are written by the op that
made them and are not tracked; neither are ops that touch no tracked tensor.

What reads: every tensor argument that does not alias (a view reads nothing), the data of an
in-place arithmetic op's `self` (``acc += x`` reads acc); what writes: every mutable argument
(``out=``, an in-place op's `self`). An in-place op that is not arithmetic (``fill_``, ``copy_``,
``masked_fill_``, ``index_put_``, ``scatter_``...) counts as writing its span and reading
nothing of it, so a partial update never makes a correct case look wrong.
"""

import os
import traceback

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
_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))


def _caller():
    """file:line of the case code that made the call (the first frame outside torch and cprr)."""
    for frame in reversed(traceback.extract_stack()):
        f = os.path.abspath(frame.filename)
        if not f.startswith((_HERE, _TORCH)) and "importlib" not in f:
            return f"{os.path.basename(f)}:{frame.lineno}"
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


def _key(t):
    base = t.data_ptr() - t.storage_offset() * t.element_size()
    return (t.device.type, t.device.index, base)


class Tracker(TorchDispatchMode):
    """Active while a case body runs (worker._body); one per case execution."""

    def __init__(self, native):
        super().__init__()
        self._native = native
        self._tracked = {}  # (device type, index, storage address) -> buffer id
        self._made = 0

    # ---- what the case's other calls (captures, collectives) touch -------------------------

    def touches(self, tensors):
        out = []
        for t in tensors:
            if t.numel() == 0:
                continue
            buffer = self._tracked.get(_key(t))
            if buffer is not None:
                out.append((buffer, t.storage_offset() * t.element_size(), _extent(t)))
        return out

    def note(self, what, reads=(), writes=()):
        """Logs a call outside aten (a capture, a collective) that reads/writes these tensors."""
        r, w = self.touches(reads), self.touches(writes)
        if r or w:
            self._native.library_op(f"{what} at {_caller()}", r, w)

    # ---- aten ops ---------------------------------------------------------------------------

    def _track(self, name, t):
        stream = torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0
        label = f"torch.{name}{tuple(t.shape)} at {_caller()}"
        self._made += 1
        self._tracked[_key(t)] = self._native.track(
            label, t.data_ptr() - t.storage_offset() * t.element_size(),
            _extent(t) + t.storage_offset() * t.element_size(), t.is_cuda, stream)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        schema = func._schema
        name = func.overloadpacket.__name__
        if not schema.name.startswith("aten::"):
            return result  # c10d's collectives: the collective wrapper logs those
        reads, writes = [], []
        if self._tracked:
            metadata_only = name in _EMPTY or name.endswith("_like") or name.startswith("new_")
            positional = [a for a in schema.arguments if not a.kwarg_only]
            bound = list(zip(positional, args))
            bound += [(a, kwargs[a.name]) for a in schema.arguments if a.kwarg_only and a.name in kwargs]
            for arg, value in bound:
                alias = arg.alias_info
                tensors = list(_tensors(value))
                if alias is not None and alias.is_write:
                    writes += tensors
                    if not arg.kwarg_only and name.rstrip("_") in _READ_MODIFY:
                        reads += tensors
                elif alias is None and not metadata_only:
                    reads += tensors
            r, w = self.touches(reads), self.touches(writes)
            if r or w:
                self._native.library_op(f"aten.{name} at {_caller()}", r, w)
        # Tensors this op made (returns that alias no argument): an address tracked before was
        # freed and reused, so it names another tensor now; an empty-family op's is tracked anew.
        made = [t for r_, t in zip(schema.returns, _tensors(result)) if r_.alias_info is None]
        for t in made:
            if t.numel() == 0:
                continue
            self._tracked.pop(_key(t), None)
            if name in _EMPTY:
                self._track(name, t)
        return result


class _Idle:
    """A native side that records nothing: what warm_up's Tracker reports to."""

    def track(self, *args):
        return 0

    def library_op(self, *args):
        pass


def warm_up():
    """Runs a few CPU ops under a Tracker once, before any case: the first use of a dispatch mode
    makes torch 2.x import torch._dynamo, sympy and more (measured 5-6 s on the GPU machine,
    where they have no bytecode cache), which would otherwise land in the first case of every
    rank. The template process pays it once for every rank it forks; a spawned rank before its
    hello, where standby hides it. Touches no GPU."""
    with Tracker(_Idle()):
        a = torch.empty(4)
        a.fill_(1.0)
        a += torch.ones(4)
        a.sum()

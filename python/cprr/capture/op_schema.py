"""What an aten op reads and writes, from its schema's alias info (as torch's CUDA sanitizer's
ArgumentHandler reads it), worked out once per op overload.

Every tensor argument that does not alias is read (a view reads nothing), every mutable argument
(``out=``, an in-place op's `self`) is written, and read too when the op is arithmetic
(``acc += x`` reads acc); a return that aliases no argument is a tensor the op makes. Ops of the
``empty`` family, ``*_like`` / ``new_*`` and the metadata queries (``is_pinned``, sizes,
strides, layout flags) read only their arguments' metadata.
"""

import functools
import math

import torch

from cprr.capture.tensor_table import key_of

EMPTY = {"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"}
# Ops that look at a tensor's metadata (its place, shape, layout, flags), never at its bytes: no
# read (pin_memory asks is_pinned of a tensor nothing wrote yet; that is no uninitialized read).
# Not the ops that answer with a host value computed from the bytes (item, equal, is_nonzero).
METADATA = {
    "is_pinned", "is_contiguous", "is_non_overlapping_and_dense", "size", "stride", "numel",
    "dim", "storage_offset", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
    "is_same_size", "is_complex", "is_floating_point", "is_signed", "is_conj", "is_neg",
    "is_inference", "is_coalesced", "is_set_to", "_nnz", "_is_zerotensor",
    "_has_same_storage_numel", "is_leaf", "output_nr", "_version", "data_ptr",
}
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
# Ops whose written bytes are their read bytes laid end to end (checked per call: moves_bytes).
_MOVES = {"copy_", "_copy_from", "_to_copy", "clone", "_pin_memory", "pin_memory", "cat"}
# What torch.tensor(data) runs after building its tensor past the dispatcher.
LIFTS = {"lift_fresh", "lift", "lift_fresh_copy"}

_READ, _WRITE = 1, 2


class Plan:
    """What the capture needs of an aten op's schema: each argument's role (-1: no tensor of
    interest, else a mask of _READ and _WRITE; an aliasing argument that is not written, a view's
    input, is 0), which returns are tensors it makes."""

    def __init__(self, func):
        schema = func._schema
        self.name = func.overloadpacket.__name__
        name = self.name
        metadata_only = name in EMPTY or name in METADATA or name.endswith("_like") or \
            name.startswith("new_")
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
        self.may_move = name in _MOVES  # moves_bytes decides per call

    def non_blocking(self, args, kwargs):
        if self._non_blocking is None:
            return False
        index, name = self._non_blocking
        if name in kwargs:
            return bool(kwargs[name])
        return index is not None and index < len(args) and bool(args[index])


@functools.lru_cache(maxsize=None)
def plan(func):
    """The op's Plan; None for an op that is not aten's."""
    return Plan(func) if func._schema.name.startswith("aten::") else None


def tensors(value):
    """The tensors in an argument or a return: itself, or those of a list or tuple."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors(v)


def made(plan, result, inputs):
    """(tensor, its memory's key) of each tensor with elements, on the host or a CUDA device, the
    op made: the returns that alias no argument, except over an argument's memory (`inputs`:
    _unsafe_view, what matmul reshapes with, returns its input's memory though its schema says
    it aliases nothing)."""
    values = result if len(plan.returns) > 1 else (result,)
    aliased = None
    for makes, value in zip(plan.returns, values):
        if not makes:
            continue
        for t in tensors(value):
            if t.numel() == 0 or t.device.type not in ("cpu", "cuda"):
                continue
            key = key_of(t)
            if aliased is None:
                aliased = {key_of(i) for i in inputs}
            if key not in aliased:
                yield t, key


class Accesses:
    """The tensors an op's arguments give it: those it reads, those it writes, and every one."""

    __slots__ = ("reads", "writes", "every")

    def __init__(self, plan, args, kwargs):
        self.reads, self.writes, self.every = [], [], []
        for role, value in zip(plan.positional, args):
            if role >= 0:
                self._add(role, value)
        if kwargs:
            for arg, value in kwargs.items():
                role = plan.keyword.get(arg, -1)
                if role >= 0:
                    self._add(role, value)
        self._drop_host_scalars(plan, kwargs)

    def _drop_host_scalars(self, plan, kwargs):
        # A 0-dim CPU tensor given to an op of the GPU (a Python number torch wrapped, fill_'s
        # value) is read by the host as the op is issued, not by the stream later: no stream op
        # reads it.
        if not any(_host_scalar(t) for t in self.reads):
            return
        if device_of(self.every, kwargs) is None or (plan.copy and crosses(self.every, kwargs)):
            return
        self.reads = [t for t in self.reads if not _host_scalar(t)]

    def _add(self, role, value):
        found = list(tensors(value))
        self.every += found
        if role & _READ:
            self.reads += found
        if role & _WRITE:
            self.writes += found


def _host_scalar(t):
    return t.dim() == 0 and t.device.type == "cpu"


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


def moves_bytes(plan, access, args, kwargs):
    """Whether this call of the op only moves bytes: its written bytes, laid end to end, are its
    read bytes laid end to end, element for element (OpRecord::moves). True for a copy, clone,
    cast or pin of contiguous tensors with as many elements on each side, and a cat of contiguous
    tensors along a dimension with nothing but ones before it; anything else (a broadcast, a
    strided copy, a cat of inner slices) is a plain read."""
    if not plan.may_move or not access.reads:
        return False
    if any(not t.is_contiguous() for t in access.reads + access.writes):
        return False
    if kwargs.get("memory_format") not in (None, torch.preserve_format, torch.contiguous_format):
        return False  # a made tensor in another layout (channels_last): not in the reads' order
    if access.writes and sum(t.numel() for t in access.reads) != \
            sum(t.numel() for t in access.writes):
        return False
    if plan.name != "cat":
        return True
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    first = next((t for t in access.reads if t.dim() > 0), None)
    return first is not None and math.prod(first.shape[:dim % first.dim()]) == 1


def crosses(tensors, kwargs):
    """Whether an op moves bytes between host and device memory."""
    types = {t.device.type for t in tensors}
    device = kwargs.get("device")
    if device is not None:
        types.add(torch.device(device).type)
    return "cuda" in types and "cpu" in types

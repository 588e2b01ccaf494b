"""What a torch.distributed call is, as cprr's logs name it: its fingerprint (kind, dtype, bytes,
root, reduction) for the collective log, an uneven all-to-all's bytes per rank, and which of its
arguments it reads and writes for the op log.
"""

import torch
import torch.distributed as dist

from cprr.api import tensors as _tensors
from cprr.distributed import groups as _groups


def _op_name(op):
    """The lower-case name of a torch reduction: a ReduceOp.RedOpType (a pybind11 enum with a
    .name; what torch < 1.13 and >= 2.0 hand out as ReduceOp.SUM...) or a ReduceOp object holding
    one in .op (torch 1.13's ReduceOp.SUM, _make_nccl_premul_sum). Never str(op): torch 1.13's
    is '<... ReduceOp object at 0x...>', whose address differs across ranks."""
    red = getattr(op, "op", op)
    name = getattr(red, "name", None)
    if not isinstance(name, str):
        text = str(red)
        name = type(red).__name__ if " object at 0x" in text else text.rsplit(".", 1)[-1]
    return name.lower()


def _reduce(op):
    """(kind suffix, cprr reduction) of a torch ReduceOp."""
    name = _op_name(op)
    if name in ("sum", "max", "min"):
        return "", name
    # The log's reduction knows sum, max and min; any other op is told apart by its kind.
    return f"({name})", "sum"


def _first(tensors):
    return tensors[0] if tensors else None


def _fp(kind, tensor=None, total=None, root=-1, op=None):
    dtype = _tensors.dtype_name(tensor) if tensor is not None else "u8"
    size = total if total is not None else (_tensors.nbytes(tensor) if tensor is not None else 0)
    suffix, cprr_op = _reduce(op) if op is not None else ("", "sum")
    return (kind + suffix, dtype, size, root, cprr_op)


def rank_arg(a, name, default=None):
    """A rank argument (src, dst) as a rank of the world: torch 2.x also takes it as a rank of the
    group (group_src, group_dst)."""
    value = a.get(name)
    if value is None:
        value = _groups.global_rank(a.get("group"), a.get("group_" + name))
    return default if value is None else value


def _sum_bytes(tensors):
    return sum(_tensors.nbytes(t) for t in tensors)


# name -> fingerprint of its bound arguments (a dict), for the default group's collectives.
COLLECTIVES = {
    "all_reduce": lambda a: _fp("all_reduce", a["tensor"], op=a.get("op", dist.ReduceOp.SUM)),
    "broadcast": lambda a: _fp("broadcast", a["tensor"], root=rank_arg(a, "src")),
    "reduce": lambda a: _fp("reduce", a["tensor"], root=rank_arg(a, "dst"),
                            op=a.get("op", dist.ReduceOp.SUM)),
    "all_gather": lambda a: _fp("all_gather", a["tensor"]),
    "all_gather_into_tensor": lambda a: _fp("all_gather", a["input_tensor"]),
    "_all_gather_base": lambda a: _fp("all_gather", a["input_tensor"]),
    "reduce_scatter": lambda a: _fp(
        "reduce_scatter", _first(a["input_list"]), total=_sum_bytes(a["input_list"]),
        op=a.get("op", dist.ReduceOp.SUM)),
    "reduce_scatter_tensor": lambda a: _fp(
        "reduce_scatter", a["input"], op=a.get("op", dist.ReduceOp.SUM)),
    "_reduce_scatter_base": lambda a: _fp(
        "reduce_scatter", a["input"], op=a.get("op", dist.ReduceOp.SUM)),
    # Uneven splits are normal for all-to-all: as all_to_all_v, sizes are not compared.
    "all_to_all": lambda a: _fp(
        "all_to_all_v", _first(a["input_tensor_list"]), total=_sum_bytes(a["input_tensor_list"])),
    "all_to_all_single": lambda a: _fp(
        "all_to_all_v" if a.get("input_split_sizes") or a.get("output_split_sizes")
        else "all_to_all", a["input"]),
    "gather": lambda a: _fp("gather", a["tensor"], root=rank_arg(a, "dst", 0)),
    "scatter": lambda a: _fp("scatter", a["tensor"], root=rank_arg(a, "src", 0)),
    "barrier": lambda a: _fp("barrier"),
}

def splits(name, bound, group):
    """An uneven all-to-all's bytes to and from each rank of its group (group-rank order) and the
    bytes of one row (0: not told in rows), as keyword arguments of enter_collective; {} for any
    other call."""
    if name == "all_to_all":
        sends = [_tensors.nbytes(t) for t in bound["input_tensor_list"]]
        recvs = [_tensors.nbytes(t) for t in bound["output_tensor_list"]]
        return {"send_bytes": sends, "recv_bytes": recvs}
    if name != "all_to_all_single":
        return {}
    inp, out = bound["input"], bound["output"]
    in_splits, out_splits = bound.get("input_split_sizes"), bound.get("output_split_sizes")
    if not (in_splits or out_splits) or inp.dim() == 0 or out.dim() == 0:
        return {}
    size = dist.get_world_size(None if _groups.is_world(group) else group)

    def row(t):
        return _tensors.nbytes(t) // t.shape[0] if t.shape[0] else 0

    def per_rank(splits, t):
        rows = list(splits) if splits else [t.shape[0] // size] * size
        return [int(n) * row(t) for n in rows]

    row_bytes = row(inp) if row(inp) == row(out) else 0
    return {"send_bytes": per_rank(in_splits, inp), "recv_bytes": per_rank(out_splits, out),
            "row_bytes": row_bytes}


# name -> (arguments it reads, arguments it writes); an in-place collective's tensor is both.
_ACCESS = {
    "all_reduce": (("tensor",), ("tensor",)),
    "broadcast": (("tensor",), ("tensor",)),
    "reduce": (("tensor",), ("tensor",)),
    "all_gather": (("tensor",), ("tensor_list",)),
    "all_gather_into_tensor": (("input_tensor",), ("output_tensor",)),
    "_all_gather_base": (("input_tensor",), ("output_tensor",)),
    "reduce_scatter": (("input_list",), ("output",)),
    "reduce_scatter_tensor": (("input",), ("output",)),
    "_reduce_scatter_base": (("input",), ("output",)),
    "all_to_all": (("input_tensor_list",), ("output_tensor_list",)),
    "all_to_all_single": (("input",), ("output",)),
    "gather": (("tensor",), ("gather_list",)),
    "scatter": (("scatter_list",), ("tensor",)),
    "send": (("tensor",), ()),
    "isend": (("tensor",), ()),
    "recv": ((), ("tensor",)),
    "irecv": ((), ("tensor",)),
    "batch_isend_irecv": (("sends",), ("recvs",)),
}


# name -> (the argument naming the root, what only the root reads, what only the root writes):
# a rooted collective's other ranks neither send their copy nor receive one (broadcast_object_list
# broadcasts into a torch.empty on every rank but the root).
_ROOTED = {
    "broadcast": ("src", ("tensor",), ()),
    "reduce": ("dst", (), ("tensor",)),
    "scatter": ("src", ("scatter_list",), ()),
    "gather": ("dst", (), ("gather_list",)),
}


def access(name, bound):
    """(arguments read, arguments written) by this rank's call of `name`."""
    reads, writes = _ACCESS.get(name, ((), ()))
    if name in _ROOTED:
        root_arg, root_reads, root_writes = _ROOTED[name]
        if rank_arg(bound, root_arg, 0) != dist.get_rank():
            reads = tuple(a for a in reads if a not in root_reads)
            writes = tuple(a for a in writes if a not in root_writes)
    return reads, writes


def tensors_of(bound, names):
    """The strided tensors of arguments `names`: a sparse tensor has no storage of its own to
    log (gloo's sparse all_reduce gives its input new indices and values), so a collective's
    access to one is not in the op log."""
    out = []
    for n in names:
        v = bound.get(n)
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += [t for t in v if isinstance(t, torch.Tensor)]
    return [t for t in out if t.layout == torch.strided]

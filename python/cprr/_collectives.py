"""torch.distributed calls fingerprinted into cprr's logs.

Each collective a case calls is numbered in its group (cprr._groups names them), written to the
rank's flight record *before* torch sees it (so a mismatch that then hangs or aborts is still
named) and to the collective log, which cprr compares across the group's ranks
(``collective_mismatch``), lines up in a hang diagnosis and draws in the trace. A send or recv is
numbered on its channel (group, sender, receiver), so each recv is matched with its send. Calls
made while no case runs (the worker's own set-up) are not numbered.
"""

import contextlib
import functools
import inspect

import torch
import torch.distributed as dist

from cprr import _groups, _running, _shim, _staging, _tensors
from cprr._op_schema import device_of
from cprr._where import caller


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


def _rank_arg(a, name, default=None):
    """A rank argument (src, dst) as a rank of the world: torch 2.x also takes it as a rank of the
    group (group_src, group_dst)."""
    value = a.get(name)
    if value is None:
        value = _groups.global_rank(a.get("group"), a.get("group_" + name))
    return default if value is None else value


def _sum_bytes(tensors):
    return sum(_tensors.nbytes(t) for t in tensors)


# name -> fingerprint of its bound arguments (a dict), for the default group's collectives.
_COLLECTIVES = {
    "all_reduce": lambda a: _fp("all_reduce", a["tensor"], op=a.get("op", dist.ReduceOp.SUM)),
    "broadcast": lambda a: _fp("broadcast", a["tensor"], root=_rank_arg(a, "src")),
    "reduce": lambda a: _fp("reduce", a["tensor"], root=_rank_arg(a, "dst"),
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
    "gather": lambda a: _fp("gather", a["tensor"], root=_rank_arg(a, "dst", 0)),
    "scatter": lambda a: _fp("scatter", a["tensor"], root=_rank_arg(a, "src", 0)),
    "barrier": lambda a: _fp("barrier"),
}

def _splits(name, bound, group):
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


def _access(name, bound):
    """(arguments read, arguments written) by this rank's call of `name`."""
    reads, writes = _ACCESS.get(name, ((), ()))
    if name in _ROOTED:
        root_arg, root_reads, root_writes = _ROOTED[name]
        if _rank_arg(bound, root_arg, 0) != dist.get_rank():
            reads = tuple(a for a in reads if a not in root_reads)
            writes = tuple(a for a in writes if a not in root_writes)
    return reads, writes


def _tensors_of(bound, names):
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


@contextlib.contextmanager
def _distrusted_on_raise(native, name):
    """A torch.distributed call `name` that raises may leave the world's transport broken (a
    Gloo pair closed mid-message, a peer still waiting): the world is replaced after the case
    rather than handed the next one, which would fail for it."""
    try:
        yield
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        native.distrust_transport(f"dist.{name} raised {type(e).__name__}: {first}"[:300])
        raise


class _Work:
    """The Work of an async call: its wait() is where the case's stream (the host, for CPU
    tensors) is ordered after the call, so that is logged; everything else is the Work's."""

    def __init__(self, work, capture, name, event, device):
        self._work = work
        self._capture = capture
        self._name = name
        self._event = event
        self._device = device
        self.when_done = None  # called once with the torch Work when it is known done

    def _done(self):
        if self.when_done is not None:
            when_done, self.when_done = self.when_done, None
            when_done(self._work)

    def wait(self, *args, **kwargs):
        c = _running.capture()
        if c is not self._capture:  # waited for after its case ended: nothing to order
            return self._work.wait(*args, **kwargs)
        with c.in_op(), _distrusted_on_raise(_running.current(), f"{self._name} Work.wait()"):
            result = self._work.wait(*args, **kwargs)
        c.order("wait", f"dist.{self._name} Work.wait()", c.stream_of(self._device)[0],
                self._event)
        self._done()
        return result

    def is_completed(self):
        """Polling instead of waiting: once it says True, what the case does next is ordered
        after the call, as after wait()."""
        done = self._work.is_completed()
        c = _running.capture()
        if done and c is self._capture:
            c.order("wait", f"dist.{self._name} Work.is_completed()",
                    c.stream_of(self._device)[0], self._event)
            self._done()
        return done

    def __getattr__(self, attr):
        return getattr(self._work, attr)


def _issue(name, bound, call, native, what):
    """Runs `call` (the torch call) logged on the stream it runs on: the tensors' current stream
    (the host for CPU tensors) when it returns done, or a stream of its own when async_op=True,
    ordered after what the caller's stream issued before and before the Work's wait()."""
    c = _running.capture()
    if c is None:
        what(0)
        return call()
    reads, writes = _access(name, bound)
    reads, writes = _tensors_of(bound, reads), _tensors_of(bound, writes)
    device = device_of(reads + writes, {})
    stream = c.stream_of(device)[0]
    is_async = (bool(bound.get("async_op", False))
                or name in ("isend", "irecv", "batch_isend_irecv"))
    if is_async:
        stream_of_call = c.streams.new_stream()
        if stream >= 0:
            event = c.streams.new_event()
            c.order("record", f"dist.{name} issued", stream, event)
            c.order("wait", f"dist.{name} starts after what was issued before it",
                    stream_of_call, event)
        # (Called from the host, for CPU tensors on cuda: a stream op follows everything the host
        # issued before it, so there is nothing to record.)
        stream = stream_of_call
    # An async collective says so in its name: a race with it is fixed by waiting on its Work.
    label = f"dist.{name}(async_op=True)" if bound.get("async_op") else f"dist.{name}"
    sync_after = c.note(label, reads, writes, stream=stream)
    what(stream)
    with c.in_op():
        work = call()
        if sync_after:
            _complete_now(work)
            c.synchronize()
    if not is_async or work is None:
        return work
    done = c.streams.new_event()
    c.order("record", f"dist.{name} done", stream, done)
    c.used_by(reads + writes, stream)
    if isinstance(work, list):  # batch_isend_irecv: a Work per op (or one for the batch)
        return [_Work(w, c, name, done, device) for w in work]
    return _Work(work, c, name, done, device)


def _complete_now(work):
    """A replay syncs after this call (serialized, a sync bisection's prefix, the fix applied):
    the host waits for the call itself, whose work a device sync does not cover (gloo's thread,
    NCCL's stream), so what the case issues next runs after it. Its Work stays the case's to wait
    for (waiting again returns at once); nothing is logged, so the op log stays the record's."""
    for w in work if isinstance(work, list) else [work]:
        if w is not None and hasattr(w, "wait"):
            w.wait()


_P2P = {"send": ("send", "dst"), "isend": ("send", "dst"), "recv": ("recv", "src"),
        "irecv": ("recv", "src")}


def _enter_p2p(native, kind, peer, tensor, group, where):
    """A send or recv entered on its channel; None for a recv from any source (no channel)."""
    described = _groups.describe(group, native)
    if peer is None or peer < 0 or described is None:
        return None
    number, members = described
    return native.enter_p2p(kind, int(peer), _tensors.dtype_name(tensor), _tensors.nbytes(tensor),
                            number, members, where)


def _recv_from_any(name, bound, call, native, where):
    """recv/irecv with no src: its channel is known once the message came (recv returns the
    sender; an irecv's Work tells it once done), so it is numbered then, matched with its send
    as any other. A hang inside it is named by the watchdog alone."""
    group = bound.get("group")

    def numbered(source):
        handle = _enter_p2p(native, "recv", source, bound["tensor"], group, where)
        if handle is not None:
            native.complete_collective(handle)

    result = _issue(name, bound, call, native, lambda stream: None)
    if name == "recv":
        numbered(result)  # torch returns the sender, a rank of the world
    elif isinstance(result, _Work):
        def done(work):
            source = getattr(work, "_source_rank", None)
            numbered(_groups.global_rank(group, source()) if source is not None else None)

        result.when_done = done
    return result


def _wrap(name, original):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        native = _running.current()
        if native is None or _running.in_call():
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs).arguments
        call = functools.partial(original, *args, **kwargs)
        if name in _P2P and _staging.wanted(native, bound.get("group"), bound["tensor"]):
            call = _staging.message(name, original, signature, args, kwargs)
        where = caller()
        entered = []
        with _running.call(), _distrusted_on_raise(native, name):
            if name in _P2P:
                kind, peer_arg = _P2P[name]
                if _rank_arg(bound, peer_arg) is None:  # a recv from any source
                    return _recv_from_any(name, bound, call, native, where)

                def enter(stream):
                    entered.append(_enter_p2p(native, kind, _rank_arg(bound, peer_arg),
                                              bound["tensor"], bound.get("group"), where))
            else:
                described = _groups.describe(bound.get("group"), native)
                if described is None:  # not this rank's group: torch does nothing
                    return call()
                kind, dtype, size, root, op = _COLLECTIVES[name](bound)
                group, members = described
                splits = _splits(name, bound, bound.get("group"))

                def enter(stream):
                    entered.append(native.enter_collective(kind, dtype, int(size), int(root), op,
                                                           stream, group, members, where,
                                                           **splits))

            try:
                result = _issue(name, bound, call, native, enter)
            except Exception:
                # A call that raised (a timeout a test of timeouts expects) is no collective of
                # the log if the case then passes on this rank (LibraryHooks::collective_raised).
                if entered and entered[0] is not None:
                    native.collective_raised(entered[0])
                raise
            # An async call counts as completed once issued; its Work.wait() is the case's.
            if entered and entered[0] is not None:
                native.complete_collective(entered[0])
            return result

    wrapper.__cprr_wrapped__ = original
    return wrapper


def _wrap_batch(original):
    """batch_isend_irecv: torch's coalescing takes only its own Work objects, so the batch's
    isend/irecv calls run unwrapped (inside the wrapper they are a nested call) and the batch is
    logged as one async call that reads what it sends and writes what it receives, each op
    entered on its channel, its Works waited for as any async call's."""

    @functools.wraps(original)
    def wrapper(p2p_op_list, *args, **kwargs):
        native = _running.current()
        if native is None or _running.in_call():
            return original(p2p_op_list, *args, **kwargs)
        ops = list(p2p_op_list)
        sends = [p for p in ops if _base_name(p.op) == "isend"]
        recvs = [p for p in ops if _base_name(p.op) == "irecv"]
        bound = {"sends": [p.tensor for p in sends], "recvs": [p.tensor for p in recvs]}
        where = caller()
        entered = []

        def enter(stream):
            for kind, batch in (("send", sends), ("recv", recvs)):
                for p in batch:
                    entered.append(_enter_p2p(native, kind, p.peer, p.tensor,
                                              getattr(p, "group", None), where))

        staged = [_base_name(p.op) if _staging.wanted(native, getattr(p, "group", None), p.tensor)
                  else None for p in ops]
        call = (_staging.batch(original, ops, staged, args, kwargs) if any(staged)
                else functools.partial(original, p2p_op_list, *args, **kwargs))
        with _running.call(), _distrusted_on_raise(native, "batch_isend_irecv"):
            result = _issue("batch_isend_irecv", bound, call, native, enter)
        for handle in entered:
            if handle is not None:
                native.complete_collective(handle)
        return result

    wrapper.__cprr_wrapped__ = original
    return wrapper


# Calls of torch.distributed that are in no op log (their work is the transport's, host to host)
# but may leave it broken when they raise: a monitored_barrier that timed out leaves its peers'
# Gloo pairs closed, and a pooled world's next case would fail for it.
_UNLOGGED = ("monitored_barrier",)


def _wrap_unlogged(name, original):
    """`name` in a case: torch's own call, whose raising distrusts the world's transport."""

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        native = _running.current()
        if native is None or _running.in_call():
            return original(*args, **kwargs)
        with _running.call(), _distrusted_on_raise(native, name):
            return original(*args, **kwargs)

    wrapper.__cprr_wrapped__ = original
    return wrapper


def _wrap_new_group(original):
    """new_group and split_group (and what calls them: new_subgroups, DeviceMesh): every group
    is numbered as made (cprr._groups); one made while a case runs is the case's, in its log
    and ended with it (cprr._running.made_group)."""
    signature = inspect.signature(original)
    splits = original.__name__ == "split_group"

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        group = original(*args, **kwargs)
        if splits:  # one call, a group per list of split_ranks: this rank's is its own
            arguments = signature.bind(*args, **kwargs).arguments
            split_ranks = arguments.get("split_ranks") or []
            parent = arguments.get("parent_pg")
            me = dist.get_rank()
            if not _groups.is_world(parent):  # split_ranks are ranks of the parent group
                me = dist.get_group_rank(parent, me)
            index = next((i for i, ranks in enumerate(split_ranks) if me in ranks), None)
            _groups.made_split(group, len(split_ranks), index)
        else:
            _groups.made(group)
        native = _running.current()
        if native is not None and group is not None and \
                group is not dist.GroupMember.NON_GROUP_MEMBER:
            _running.made_group(group)
            _groups.describe(group, native)
        return group

    wrapper.__cprr_wrapped__ = original
    return wrapper


def end_groups(groups):
    """Destroys `groups` (those a case made), newest first; one the case destroyed itself is
    skipped. Returns how many were destroyed."""
    ended = 0
    for group in reversed(groups):
        try:
            dist.destroy_process_group(group)
            ended += 1
        except (ValueError, RuntimeError):  # destroyed by the case already
            pass
    return ended


def _base_name(op):
    """The torch.distributed name of a P2POp's op, wrapped by cprr or not."""
    return getattr(getattr(op, "__cprr_wrapped__", op), "__name__", "")


# Modules of torch that import c10d's functions by name when torch.distributed is imported
# (before cprr wraps them): DeviceMesh makes its groups with new_group and split_group.
_IMPORTERS = ("torch.distributed.device_mesh", "torch.distributed._mesh_layout")


def _replace(c10d, name, wrap):
    """Puts wrap(original) in place of `name` in distributed_c10d and, where it is the same
    function, in torch.distributed and the modules that imported it; once (a wrapped one is left
    as it is)."""
    import sys

    original = getattr(c10d, name, None)
    if original is None or hasattr(original, "__cprr_wrapped__"):
        return
    wrapped = wrap(original)
    setattr(c10d, name, wrapped)
    for module in [dist] + [sys.modules.get(m) for m in _IMPORTERS]:
        if module is not None and getattr(module, name, None) is original:
            setattr(module, name, wrapped)


def install():
    """Wraps torch.distributed's collectives and point-to-point calls, in the package and in
    distributed_c10d (where torch's own helpers, e.g. all_gather_object, look them up). Done once,
    before any case file is imported, so `from torch.distributed import all_reduce` gets them too.
    """
    from torch.distributed import distributed_c10d as c10d

    for name in list(_COLLECTIVES) + list(_P2P):
        _replace(c10d, name, functools.partial(_wrap, name))
    for name in _UNLOGGED:
        _replace(c10d, name, functools.partial(_wrap_unlogged, name))
    _replace(c10d, "new_group", _wrap_new_group)
    _replace(c10d, "split_group", _wrap_new_group)
    _replace(c10d, "batch_isend_irecv", _wrap_batch)
    # A suite's own set-up of the default group (cprr._shim).
    _replace(c10d, "init_process_group", _shim.wrap_init)
    _replace(c10d, "destroy_process_group", _shim.wrap_destroy)

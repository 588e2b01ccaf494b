"""torch.distributed calls fingerprinted into cprr's logs.

Each collective a case calls is numbered in its group (cprr.distributed.groups names them), written
to the rank's flight record *before* torch sees it (so a mismatch that then hangs or aborts is still
named) and to the collective log, which cprr compares across the group's ranks
(``collective_mismatch``), lines up in a hang diagnosis and draws in the trace. A send or recv is
numbered on its channel (group, sender, receiver), so each recv is matched with its send. Calls
made while no case runs (the worker's own set-up) are not numbered.
"""

import functools
import inspect

import torch.distributed as dist

from cprr.api import running as _running
from cprr.api import tensors as _tensors
from cprr.capture.where import caller
from cprr.distributed import backends as _backends
from cprr.distributed import fingerprint as _fingerprint
from cprr.distributed import groups as _groups
from cprr.distributed import shim as _shim
from cprr.distributed import staging as _staging
from cprr.distributed import torch_helpers as _torch_helpers
from cprr.distributed import work as _work


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

    result = _work.issue(name, bound, call, native, lambda stream: None)
    if name == "recv":
        numbered(result)  # torch returns the sender, a rank of the world
    elif result is not None:
        def done(work):
            if _running.current() is not native:  # waited for after its case ended
                return
            source = getattr(work, "_source_rank", None)
            numbered(_groups.global_rank(group, source()) if source is not None else None)

        _work.on_done(result, done)
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
        with _running.call(), _work.distrusted_on_raise(native, name):
            if name in _P2P:
                kind, peer_arg = _P2P[name]
                if _fingerprint.rank_arg(bound, peer_arg) is None:  # a recv from any source
                    return _recv_from_any(name, bound, call, native, where)

                def enter(stream):
                    entered.append(_enter_p2p(native, kind, _fingerprint.rank_arg(bound, peer_arg),
                                              bound["tensor"], bound.get("group"), where))
            else:
                described = _groups.describe(bound.get("group"), native)
                if described is None:  # not this rank's group: torch does nothing
                    return call()
                kind, dtype, size, root, op = _fingerprint.COLLECTIVES[name](bound)
                group, members = described
                splits = _fingerprint.splits(name, bound, bound.get("group"))

                def enter(stream):
                    entered.append(native.enter_collective(kind, dtype, int(size), int(root), op,
                                                           stream, group, members, where,
                                                           **splits))

            try:
                result = _work.issue(name, bound, call, native, enter)
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
        with _running.call(), _work.distrusted_on_raise(native, "batch_isend_irecv"):
            result = _work.issue("batch_isend_irecv", bound, call, native, enter)
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
        with _running.call(), _work.distrusted_on_raise(native, name):
            return original(*args, **kwargs)

    wrapper.__cprr_wrapped__ = original
    return wrapper


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

    for name in list(_fingerprint.COLLECTIVES) + list(_P2P):
        _replace(c10d, name, functools.partial(_wrap, name))
    for name in _UNLOGGED:
        _replace(c10d, name, functools.partial(_wrap_unlogged, name))
    _replace(c10d, "new_group", _groups.wrap_new_group)
    _replace(c10d, "split_group", _groups.wrap_new_group)
    # Groups torch's registry does not know, numbered as they are constructed.
    _replace(c10d, "_new_process_group_helper", _groups.wrap_group_making)
    from torch._C import _distributed_c10d

    _groups.install_constructions(_distributed_c10d)
    _replace(c10d, "batch_isend_irecv", _wrap_batch)
    # A suite's own set-up of the default group (cprr.distributed.shim).
    _replace(c10d, "init_process_group", _shim.wrap_init)
    _replace(c10d, "destroy_process_group", _shim.wrap_destroy)
    # A DeviceMesh made where the case never called init_process_group (DeviceMesh would).
    _backends.install_mesh_hook()
    # torch's C++ helpers that call a group themselves (DDP's construction).
    _torch_helpers.install()

"""torch's C++ that calls a process group itself, or waits for a case's Work: what cprr sees of it.

DistributedDataParallel's construction calls two functions of torch.distributed written in C++:
``_verify_params_across_processes`` (all-gathers the parameter count into ``empty_like`` tensors
and reads each with ``.item()``, then broadcasts the shapes) and ``_broadcast_coalesced`` (copies
the module's state into flat buffers, broadcasts them from the authoritative rank and copies them
back). Their collectives go to the group's C++ methods, past torch.distributed's Python functions
where cprr.distributed.collectives logs a collective. Left to the op capture, such a call is a
string of aten ops around writes nobody logged: its ``.item()`` reads a tensor "nothing wrote"
(a false ``uninitialized_read`` on every DDP model), and its copies back look like copies of
stale buffers.

So within a case each of them is one op of the op log, on the stream its tensors are on, reading
what it sends and writing what it receives; the aten work inside it is torch's own (the capture's
own-work block: no ops of the case, and its CUDA work is not outside the op log). Both wait for
their collectives before they return, so the op is not async. They are not in the collective log:
their collectives are torch's, the same on every rank that builds the same model (a rank that
builds another one gets torch's own error from the verification).

A Work the case hands to torch's C++ (HAND_OVERS: Join's all_reduce, handed to DDP's reducer)
is waited for there, past the Work's Python wait() where cprr logs the ordering: it is logged
at the hand-over (cprr.distributed.work.handed_over).

Not seen: the collectives of DDP's reducer in the backward pass (its buckets' all-reduces), on
torch 1.13 at all, on torch 2.x as dispatcher ops cprr does not log. The reducer copies each
gradient into its bucket and back with aten ops the capture sees, so nothing reads bytes no op
wrote; what the op log lacks is the all-reduce between the two copies.
"""

import functools

import torch.distributed as dist

from cprr.api import running as _running
from cprr.distributed import fingerprint as _fingerprint
from cprr.distributed import work as _work


def _verify_access(bound):
    """_verify_params_across_processes(process_group, params, logger): it reads the parameters'
    shapes and strides, never their data."""
    return [], []


def _broadcast_access(bound):
    """_broadcast_coalesced(process_group, tensors, buffer_size, src): the root (a rank of the
    group) reads its tensors, every other rank's are written."""
    tensors = _fingerprint.tensors_of(bound, ("tensors",))
    group = bound.get("process_group")
    if group is None or int(bound.get("src", 0)) == group.rank():
        return tensors, []
    return [], tensors


# name -> (its parameters in order, as its pybind11 signature names them; what it reads and
# writes of its bound arguments).
HELPERS = {
    "_verify_params_across_processes": (("process_group", "params", "logger"), _verify_access),
    "_broadcast_coalesced": (("process_group", "tensors", "buffer_size", "src"),
                             _broadcast_access),
}


def wrap(name, original):
    """`name` (a HELPERS entry) as a case sees it (see the module's doc)."""
    parameters, access = HELPERS[name]

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        native, capture = _running.current(), _running.capture()
        if native is None or capture is None or _running.in_call():
            return original(*args, **kwargs)
        bound = dict(zip(parameters, args), **kwargs)
        reads, writes = access(bound)
        with _running.call(), _work.distrusted_on_raise(native, name):
            sync_after = capture.note(f"dist.{name}", reads, writes)
            with capture.in_op(), capture.own_work():
                result = original(*args, **kwargs)
            if sync_after:
                capture.synchronize()
            return result

    wrapper.__cprr_wrapped__ = original
    return wrapper


# (class, method) of torch's that take a case's Work and wait for it in C++: DDP's forward hands
# the Work of Join's all_reduce (the count of ranks not yet joined) to its reducer, which waits
# for it in the backward pass before it reads the count (cprr.distributed.work.handed_over).
HAND_OVERS = (("Reducer", "_set_forward_pass_work_handle"),)


def _wrap_hand_over(owner, name, original):
    @functools.wraps(original)
    def wrapper(self, work, *args, **kwargs):
        _work.handed_over(work, f"{owner}.{name}")
        return original(self, work, *args, **kwargs)

    wrapper.__cprr_wrapped__ = original
    return wrapper


def install():
    """Wraps HELPERS where torch's Python looks them up (torch.distributed's attributes, at each
    call), and HAND_OVERS in their classes; once."""
    for name in HELPERS:
        original = getattr(dist, name, None)
        if original is not None and not hasattr(original, "__cprr_wrapped__"):
            setattr(dist, name, wrap(name, original))
    for owner, name in HAND_OVERS:
        cls = getattr(dist, owner, None)
        original = getattr(cls, name, None)
        if original is not None and not hasattr(original, "__cprr_wrapped__"):
            setattr(cls, name, _wrap_hand_over(owner, name, original))

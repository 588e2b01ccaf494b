"""Declared accesses: a call whose work cprr cannot see through torch's dispatcher (a fused
extension kernel called through pybind, a vendor library, a raw launch) named with the tensors it
reads, writes, or is handed without knowing how (``uses``), so the race and uninitialized-read
checks cover it::

    with cprr.accesses("fused_attn_fwd", reads=[q, k, v], writes=[out, max_logit]):
        tex.fused_attn_fwd(q, k, v, out, max_logit)

The call is one op of the op log, on the current stream of the tensors' device, placed where the
block starts (its work is issued inside it). Tensors in ``uses`` are accesses of unknown
direction: a race through one is a candidate that ``cpreplay`` confirms or drops. Ops torch's
dispatcher runs inside the block are logged as ever; CUDA work the block issues past the
dispatcher is the declared call's, not "work outside the op log". Outside a case (cprr not
recording) the block only runs its body, so the declaration can stay in library code.
"""

from cprr.api import running as _running


class accesses:  # noqa: N801 (used as a function: `with cprr.accesses(...)`)
    """Declares the call the block makes: `name` (the op's name, with the caller's file:line),
    the tensors it reads and writes, and those it is handed without knowing how it uses them.
    A class, not a generator: the caller's line is the with statement's (cprr.capture.where)."""

    def __init__(self, name, reads=(), writes=(), uses=()):
        self._name = name
        self._tensors = {"reads": list(reads), "writes": list(writes), "uses": list(uses)}
        self._inside = None
        self._sync = None  # the capture, when a replay asks for a sync after the block
        self._held = None  # the capture, when the block holds a probe replay's probe

    def __enter__(self):
        capture = _running.capture()
        if capture is None:
            return self
        for what, tensors in self._tensors.items():
            _check_tensors(self._name, what, tensors)
        if capture.note(self._name, self._tensors["reads"], self._tensors["writes"],
                        uses=self._tensors["uses"]):
            self._sync = capture
        if self._tensors["uses"]:
            # A probe replay compares what the call was handed at the block's end, not at the
            # first dispatcher op inside it (before the call's own work ran).
            capture.hold_probe(True)
            self._held = capture
        self._inside = capture.in_op()
        self._inside.__enter__()
        return self

    def __exit__(self, *exc):
        inside, self._inside = self._inside, None
        if inside is not None:
            inside.__exit__(*exc)
        sync, self._sync = self._sync, None
        if sync is not None and exc[0] is None:
            sync.synchronize()  # the block's work is issued: the sync bisection's sync
        held, self._held = self._held, None
        if held is not None:
            held.hold_probe(False)
        return False


def _check_tensors(name, what, tensors):
    import torch

    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"cprr.accesses({name!r}): {what} takes torch.Tensors, got "
                            f"{type(t).__name__}; pass the tensors the call is given")


def declared(reads=(), writes=(), uses=(), name=None):
    """The same as a decorator, for a function called in many places (an extension's entry
    point, which has no Python signature to inspect)::

        fused_attn_fwd = cprr.declared(reads=(0, 1, 2), writes=("out",))(tex.fused_attn_fwd)

    Each of `reads`, `writes` and `uses` names arguments: an int is a position, a str a keyword
    argument; the argument is a tensor, a list or tuple of tensors, or None (nothing). An
    argument the call does not pass is nothing. `name`: the op's name (default: the function's)."""

    def wrap(fn):
        label = name or getattr(fn, "__name__", "declared call")

        def call(*args, **kwargs):
            picked = [_picked(where, args, kwargs) for where in (reads, writes, uses)]
            with accesses(label, reads=picked[0], writes=picked[1], uses=picked[2]):
                return fn(*args, **kwargs)

        call.__name__ = label
        call.__doc__ = getattr(fn, "__doc__", None)
        call.__wrapped__ = fn
        return call

    return wrap


def _picked(where, args, kwargs):
    """The tensors the arguments `where` names in this call."""
    out = []
    for w in where:
        if isinstance(w, int):
            value = args[w] if -len(args) <= w < len(args) else None
        elif isinstance(w, str):
            value = kwargs.get(w)
        else:
            raise TypeError(f"cprr.declared: {w!r} names no argument (an int position or a str "
                            "keyword)")
        if value is None:
            continue
        out.extend(value if isinstance(value, (list, tuple)) else [value])
    return out

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

from cprr import _running


class accesses:  # noqa: N801 (used as a function: `with cprr.accesses(...)`)
    """Declares the call the block makes: `name` (the op's name, with the caller's file:line),
    the tensors it reads and writes, and those it is handed without knowing how it uses them.
    A class, not a generator: the caller's line is the with statement's (cprr._where)."""

    def __init__(self, name, reads=(), writes=(), uses=()):
        self._name = name
        self._tensors = {"reads": list(reads), "writes": list(writes), "uses": list(uses)}
        self._inside = None

    def __enter__(self):
        capture = _running.capture()
        if capture is None:
            return self
        for what, tensors in self._tensors.items():
            _check_tensors(self._name, what, tensors)
        capture.note(self._name, self._tensors["reads"], self._tensors["writes"],
                     uses=self._tensors["uses"])
        self._inside = capture.in_op()
        self._inside.__enter__()
        return self

    def __exit__(self, *exc):
        inside, self._inside = self._inside, None
        if inside is not None:
            inside.__exit__(*exc)
        return False


def _check_tensors(name, what, tensors):
    import torch

    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"cprr.accesses({name!r}): {what} takes torch.Tensors, got "
                            f"{type(t).__name__}; pass the tensors the call is given")

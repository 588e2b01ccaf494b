"""What a case does that its op log cannot see: counted, so the report names it, never ignored.

Two things count it: torch's CUDA trace hooks (an allocation no op the dispatcher saw made,
cprr.capture.gpu_hooks) and, on cuda, CUPTI (CUDA work the body's thread issued outside every op,
native/unseen_work.h). Neither may count torch's own work for something cprr logs (an op, a
collective, a symmetric-memory call): that work runs inside the block this object stands for.
"""


class Outside:
    """One case's work outside the op log. `counter`: the CUPTI count (the _cprr module's
    seen_enter/seen_leave/unseen_forgive), or None where nothing counts. As a context manager:
    the block of torch's own work for something cprr logged (re-entrant)."""

    def __init__(self, counter):
        self._counter = counter
        self._depth = 0  # > 0 while torch runs work cprr logged
        self.counts = {}  # what the case did that the op log cannot see -> how many times
        self._pending = {}  # the same since the last op, until that op is seen (settle)

    def __enter__(self):
        self._depth += 1
        if self._counter is not None:
            self._counter.seen_enter()
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if self._counter is not None:
            self._counter.seen_leave()
        return False

    @property
    def inside(self):
        """Within work cprr logged: what the trace hooks report meanwhile is part of it."""
        return self._depth > 0

    def count(self, what):
        """Work the op log cannot see, pending until the next op tells whether it was that op's
        own (settle)."""
        self._pending[what] = self._pending.get(what, 0) + 1

    def settle(self, lifts):
        """An op begins (or the case ends). torch.tensor(data, device=...) builds and copies its
        tensor past the dispatcher, then runs lift_fresh (`lifts`): what was pending is that
        constructor's. Else it was outside the op log."""
        if lifts:
            self._pending.clear()
            if self._counter is not None:
                self._counter.unseen_forgive()
            return
        for what, n in self._pending.items():
            self.counts[what] = self.counts.get(what, 0) + n
        self._pending.clear()

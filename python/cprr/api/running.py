"""The case running on this thread: its native context and its op capture.

The worker sets them for the length of a case body (``running``); what the body calls reads them:
the collectives' wrappers (cprr.distributed.collectives), ``ctx``'s captures (cprr.api.context),
torch's CUDA trace hooks and symmetric-memory wrappers. Per thread, because torch's own threads
(NCCL's watchdog) call the same hooks, and what they do is not the case body's. Imports neither
torch nor the rest of cprr: the package's import (the pytest plugin's, the controller's) stays
torch-free.
"""

import threading

_state = threading.local()


def current():
    """The native case context of the running case on this thread, or None."""
    return getattr(_state, "native", None)


def capture():
    """The running case's op capture (cprr.capture.op_capture.OpCapture) on this thread, or None."""
    return getattr(_state, "capture", None)


class running:
    """Within the block, calls on this thread are recorded into `native`, and the tensors they
    touch logged by `capture` (a cprr.capture.op_capture.OpCapture, or None)."""

    def __init__(self, native, capture=None):
        self._native = native
        self._capture = capture

    def __enter__(self):
        _state.native = self._native
        _state.capture = self._capture
        _state.depth = 0
        _state.groups = []
        _state.noted = set()
        self.groups = []
        return self

    def __exit__(self, *exc):
        _state.native = None
        _state.capture = None
        # The process groups the block made (made_group), for the caller to end.
        self.groups, _state.groups = _state.groups, []
        _state.noted = None
        return False


def noted_groups():
    """The ids of the groups the running case noted in its log (cprr.distributed.groups), or
    None."""
    return getattr(_state, "noted", None)


def made_group(group):
    """A process group the running case made (torch.distributed.new_group, wrapped): its case
    ends it (cprr.rank.case_body), so a pooled rank's next case finds only the groups it had
    before, as a fresh rank would."""
    if getattr(_state, "native", None) is not None:
        _state.groups.append(group)


def in_call():
    """Whether a torch.distributed call cprr wraps is running on this thread: torch's helpers
    (all_gather_object) make wrapped calls of their own, and only the outermost is the case's."""
    return getattr(_state, "depth", 0) > 0


class call:
    """The block of the outermost wrapped torch.distributed call (see in_call)."""

    def __enter__(self):
        _state.depth = 1
        return self

    def __exit__(self, *exc):
        _state.depth = 0
        return False

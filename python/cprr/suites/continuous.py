"""A ``MultiProcContinuousTest`` method as its harness's worker runs it: the class's own
``_worker_loop`` (a subclass's override included), on the rank's main thread.

The harness gives each rank process one worker loop per class, fed test ids through a task
queue and answering through a completion queue; its set-up (``cls.rank``, ``cls.world_size``,
``cls._init_pg``) runs once at the loop's start. Here each case calls the loop with queues of
its own: the task queue hands out the case's test id, then ends the loop's call at its next
``get`` (a BaseException the loop does not catch there), so the loop's frame ends with the case
and its process group stays, as the worker keeps it between tests. The class's next case in a
pooled rank calls the loop again; its ``_init_pg`` then gives back the group (or the skip) the
first call's set-up made instead of making another: one set-up per rank process per class, as
under the harness. A fresh rank makes it again.
"""
import contextlib

from cprr.api.skips import skip_reason


class _CaseEnded(BaseException):
    """Ends the worker loop's call once the case's test has answered (raised by the task
    queue's second ``get``, outside the loop's own ``try``)."""


class _OneTest:
    """The task and completion queues of one case: the case's test id once, then the end of the
    call; and the loop's answer for it."""

    def __init__(self, test_id):
        self._test_id = test_id
        self._handed = False
        self.answers = []

    def get(self, *args, **kwargs):
        if self._handed:
            raise _CaseEnded()
        self._handed = True
        return self._test_id

    def put(self, answer, *args, **kwargs):
        self.answers.append(answer)

    def outcome(self):
        """Returns when the test passed; raises its skip or its failure, as the harness's parent
        re-raises the loop's answer."""
        if not self.answers:
            raise RuntimeError(f"the class's _worker_loop returned without answering for "
                               f"{self._test_id} (a worker loop gets each test id from its task "
                               f"queue and puts the id, a SkipTest or an exception in its "
                               f"completion queue)")
        answer = self.answers[0]
        if isinstance(answer, BaseException):
            # The loop wraps a failure in RuntimeError("Exception in worker process: ...") with
            # the original as its cause: the original, with its traceback, is the case's error.
            raise answer.__cause__ if answer.__cause__ is not None else answer
        if answer != self._test_id:
            raise AssertionError(f"the worker loop answered {answer!r} for {self._test_id}")


@contextlib.contextmanager
def _set_up_once(cls, ctx):
    """While the loop runs: the class's ``_init_pg`` runs once per rank process (per rank and
    world size: a pooled rank serves one), later calls getting the group it made, or its skip
    again (the SystemExit of a TEST_SKIPS code, which the loop turns into a SkipTest)."""
    from cprr.distributed import backends as _backends
    import torch.distributed as dist

    own = cls.__dict__.get("_init_pg")
    real = cls._init_pg  # bound: the class's own, or the one it inherits

    def init_pg(_cls, rank, world_size, rdvz_file):
        done = cls.__dict__.get("_cprr_set_up")
        if done is not None and done[0] == (ctx.rank, ctx.world_size):
            _backends.use(done[2])  # the default group its set-up asked for, as the worker keeps it
            if done[1] is not None:
                raise SystemExit(done[1])
            return
        try:
            real(rank, world_size, rdvz_file)
        except SystemExit as e:
            if skip_reason(e) is None:
                raise
            cls._cprr_set_up = ((ctx.rank, ctx.world_size), e.code, None)
            raise
        cls._cprr_set_up = ((ctx.rank, ctx.world_size), None, dist.group.WORLD)

    cls._init_pg = classmethod(init_pg)
    try:
        yield
    finally:
        if own is None:
            del cls._init_pg
        else:
            cls._init_pg = own


def body_of(cls, method, skip_marked):
    """The case body of `method` of continuous class `cls` (`skip_marked(cls, method)` raises
    unittest's skip mark first, as unittest does before any set-up)."""

    def body(ctx):
        skip_marked(cls, method)
        queues = _OneTest(f"{cls.__module__}.{cls.__qualname__}.{method}")
        with _set_up_once(cls, ctx):
            try:
                cls._worker_loop(ctx.rank, ctx.world_size, ctx.shared_path("rendezvous_file"),
                                 queues, queues)
            except _CaseEnded:
                pass
        queues.outcome()

    body.suite_class = cls
    return body

"""What PyTorch's ``MultiProcessTestCase`` harness does once the children of a test have run: its
parent joins them, judges their exit codes (``_check_return_codes``), then runs the test's
``tearDown``. cprr's ranks are the children (cprr.suites.harness_parent runs each one's entry);
this is the join, without a rank waiting for another unless its outcome depends on them.

- Each rank leaves a mark at the execution's shared path once its child entry is done: its exit
  code and what it sent through its pipe (``leave_mark``).
- A rank judges its own exit (``judge``): the error code fails it with its traceback, the
  expected code passes (only the error code counts for a test in ``skip_return_code_checks``).
  Any other code (a TEST_SKIPS code, an odd one) means what the harness's parent makes of every
  rank's code: the rank waits for all marks and asks the class's own ``_check_return_codes``,
  handed stand-ins of the finished processes. So torch 1.x fails a test whose ranks exit with
  different codes, torch 2.x judges it by rank 0's code after the error codes and timeouts, and
  a class's override of it is honoured.
- Rank 0 asks its helper to run the tearDown once every mark is there; a rank that finds every
  mark waits for its outcome, so a tearDown that fails is the test's error (``tear_down_outcome``).

A rank that is done and passed returns at once: one that returned while a peer still waits in a
collective it never entered is seen by the controller's lone-return check, as before.

Imports neither torch nor the compiled module.
"""

import inspect
import os
import pickle
import time
import unittest

from cprr.api.skips import skip_reason
from cprr.suites import harness_helper as _harness_helper
from cprr.suites import harness_parent as _harness_parent



class ChildFailure(RuntimeError):
    """A child entry that exited as the harness counts a failure (its message is what the child
    sent through its pipe: the test's traceback)."""

    reports_failure = True  # the report shows the message, not cprr's frames (cprr.rank.case_body)


class HarnessTearDownError(RuntimeError):
    """The harness's tearDown failed after a test that passed (its traceback is the message)."""

    reports_failure = True


def _path(ctx):
    return ctx.shared_path("harness_parent")


def _mark(path, rank):
    return f"{path}.done.{rank}"


def leave_mark(ctx, spawn, exited):
    """This rank's child entry is done: `exited` is its (exit code, texts it sent), None when it
    raised instead. Rank 0 then asks its helper for the tearDown, due once every mark is there."""
    if spawn.status != "ok":
        return  # no set-up ran: nothing to join, and unittest runs no tearDown
    path = _path(ctx)
    _harness_helper.write_whole(_mark(path, ctx.rank), pickle.dumps(exited))
    if ctx.rank == 0 and _harness_parent.parent() is not None:
        _harness_parent.parent().tear_down_when_done(
            path, [_mark(path, r) for r in range(ctx.world_size)])


def _every_mark(ctx):
    """Every rank's (exit code, sent) once all are done; one that raised is (None, [])."""
    marks = [_mark(_path(ctx), r) for r in range(ctx.world_size)]
    while not all(os.path.exists(m) for m in marks):  # a rank gone: the deadline ends it
        time.sleep(_harness_helper.POLL_S)
    out = []
    for m in marks:
        with open(m, "rb") as f:
            out.append(pickle.loads(f.read()) or (None, []))
    return out


class _Exited:
    """A finished child as the harness's parent reads it (``multiprocessing.Process``)."""

    def __init__(self, rank, code):
        self.pid = -1 - rank  # a pid no real process has
        self.exitcode = code


class _Sent:
    """A child's pipe as the parent reads an errored child's traceback from it."""

    def __init__(self, texts):
        self._text = "".join(texts)

    def recv(self):
        return self._text


def _parents_verdict(cls, method, spawn, marks):
    """What the class's own ``_check_return_codes`` makes of every rank's exit: None (pass), or
    the exception it raised (unittest.SkipTest, or a failure)."""
    test = cls(method)
    fn = getattr(getattr(test, method), "__wrapped__", None)
    test.processes = [_Exited(r, code) for r, (code, _) in enumerate(marks)]
    test.pid_to_pipe = {p.pid: _Sent(sent) for p, (_, sent) in zip(test.processes, marks)}
    test.skip_return_code_checks = []
    if spawn.expected_code:
        test.special_return_code_checks = {fn: spawn.expected_code}
    check = test._check_return_codes
    # torch 2.x's takes the test's function first (its exemptions are keyed by it).
    args = (fn, 0.0) if len(inspect.signature(check).parameters) >= 2 else (0.0,)
    try:
        check(*args)
    except Exception as e:  # noqa: B902  unittest.SkipTest and the harness's failures alike
        return e
    return None


def judge(ctx, cls, method, spawn, exited):
    """This rank's outcome as the harness's parent judges the test (see the module's doc)."""
    code, sent = exited
    if code == getattr(cls, "TEST_ERROR_EXIT_CODE", 10):
        raise ChildFailure("".join(sent) or f"the child exited with the error code {code}")
    if spawn.unchecked or code == spawn.expected_code:
        return
    verdict = _parents_verdict(cls, method, spawn, _every_mark(ctx))
    if isinstance(verdict, unittest.SkipTest):
        raise unittest.SkipTest(str(verdict) or skip_reason(SystemExit(code)) or "skipped")
    if verdict is not None:
        raise ChildFailure(f"{cls.__qualname__}._run exited with status {code}; the harness "
                           f"expects {spawn.expected_code}: {type(verdict).__name__}: {verdict}" +
                           "".join(f"\n{s}" for s in sent))


def tear_down_outcome(ctx, spawn):
    """The test's tearDown, as its failure concerns this rank: when every rank is done, wait for
    the helper's outcome; a tearDown that failed fails this rank (HarnessTearDownError), one that
    skipped skips it, as unittest judges a test that passed."""
    path = _path(ctx)
    if spawn.status != "ok" or not all(os.path.exists(_mark(path, r))
                                       for r in range(ctx.world_size)):
        return
    outcome = f"{path}.tear_down"
    while not os.path.exists(outcome):  # rank 0 gone before asking: the deadline ends it
        time.sleep(_harness_helper.POLL_S)
    with open(outcome, "rb") as f:
        failed = pickle.loads(f.read())
    if failed is not None and failed[0] == "skip":
        raise unittest.SkipTest(failed[1])
    if failed is not None:
        raise HarnessTearDownError(f"the harness's tearDown failed:\n{failed[1]}")

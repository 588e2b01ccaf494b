"""The parent side of PyTorch's ``MultiProcessTestCase`` harness, run once per execution of a test.

Under its own harness a test runs in a parent process (unittest's: ``setUpClass`` once, then per
test ``setUp``, which spawns one child per rank, a join, ``tearDown``) and in the children, each
of which runs the class's child entry ``cls._run(rank, test_name, file_name, pipe, **kwargs)``.
What the children get from the parent is what ``setUp`` made: the arguments of the processes it
started, its environment (``TEMP_DIR``, ``INIT_METHOD``, ...) and the files it created.

cprr's ranks are the children. The parent side runs in a helper process each rank 0 forks before
it imports the case files it has not imported yet (``start``; the helper imports them itself,
ahead or at a test's first set-up; cprr.suites.harness_helper is the helper's side) and before its worker loop: the user's environment, no CUDA, no
communicator, none of the case's state, so the class state ``setUp`` changes (torch's file
``Barrier``) is the helper's, as it is the parent's under the harness, not rank 0's. A pooled rank 0
keeps its helper, so set-ups run per test against one parent, as under the harness.

Per execution: rank 0 asks the helper to set the test up (``set_up``). The helper runs the
class's ``setUp`` with process creation recorded instead of done (``multiprocessing``'s
``Process.start``: ``_spawn_processes``, ``_fork_processes`` and any other way through
``multiprocessing``), and answers with the recorded targets and arguments (the child's pipe
replaced by a token) and its environment's changes, pickled. Rank 0 writes that answer to a path
shared by the execution's ranks, the others read it there (``spawned``). The test's ``tearDown``
runs in the helper once every rank has finished the test's child entry, as after the harness's
join (cprr.suites.harness_join: each rank leaves a mark at the shared path; rank 0 asks its
helper to tear down once all are there). A tearDown rank 0 never asked for (it died) runs before
the next set-up or when rank 0 leaves.

Imports neither torch nor the compiled module.
"""

import io
import multiprocessing.connection
import os
import pickle
import socket
import sys
import time
import traceback
import unittest

from cprr.distributed import shim as _shim
from cprr.suites import harness_helper as _helper


class HarnessSetUpError(RuntimeError):
    """The harness's parent side failed for a test (its set-up's traceback is the message)."""

    reports_failure = True  # the report shows the message, not cprr's frames (cprr.rank.case_body)


# ---- what rank 0 holds: its helper ------------------------------------------------------------


class Parent:
    """Rank 0's handle on its helper process (one per rank process: `start`)."""

    def __init__(self, pid, conn):
        self.pid = pid
        self._conn = conn

    def close(self):
        """Ends the helper (its pending tearDown runs) and waits for it."""
        self._conn.close()
        os.waitpid(self.pid, 0)

    def tear_down_when_done(self, path, marks):
        """Asks the helper to run the pending tearDown once every file of `marks` exists (the
        ranks' marks: cprr.suites.harness_join); it writes the outcome at `path`.tear_down. No
        answer is awaited."""
        try:
            self._conn.send(("tear_down", path, marks))
        except OSError:
            pass  # the helper is gone: the next set_up says so

    def set_up(self, cls, method):
        """The helper's answer for test `method` of `cls` (pickled bytes: cprr.suites.harness_helper.answer)."""
        file = getattr(sys.modules.get(cls.__module__), "__file__", None)
        try:
            self._conn.send(("set_up", cls.__module__, file, cls.__qualname__, method))
            return self._conn.recv_bytes()
        except (EOFError, OSError) as e:
            raise HarnessSetUpError(
                f"cprr: the process that runs the harness's setUp (pid {self.pid}) is gone "
                f"({type(e).__name__}: {e}); its output is in rank 0's log") from None


_PARENT = None  # this rank process's helper: one per process, made before its worker loop


def needed(definitions):
    """Whether any of `definitions` runs a test through the harness's parent side."""
    return any(getattr(d.body, "needs_harness_parent", False) for d in definitions)


def start(import_cases=None):
    """Forks this rank's helper (rank 0, before it imports the case files it has not imported yet,
    and before its worker loop: no CUDA, no communicator, no thread of the case's yet). The
    helper first runs `import_cases`, if given: those files' import, its own (the rank hands its
    loader over: cprr.suites.harness_helper.serve). Its end of the connection closes when this
    process exits."""
    global _PARENT
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # the child starts with empty buffers: nothing is printed twice
    mine, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        mine.close()
        status = 0
        try:
            _helper.serve(theirs.detach(), import_cases)
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(status)
    theirs.close()
    _PARENT = Parent(pid, multiprocessing.connection.Connection(mine.detach()))
    return _PARENT


def parent():
    """This rank process's helper, or None when it has none."""
    return _PARENT


def stop():
    """Ends this process's helper, if any: a rank none of whose cases needs it, or a test's. A
    rank that serves keeps its helper until it exits."""
    global _PARENT
    if _PARENT is not None:
        _PARENT.close()
        _PARENT = None


# ---- what every rank does ----------------------------------------------------------------------


def spawned(ctx, cls, method):
    """The harness's parent side for this execution: rank 0 asks its helper and leaves the answer
    at a path shared by the execution's ranks; the others wait for it there. Returns a `Spawn`."""
    path = ctx.shared_path("harness_parent")
    if ctx.rank == 0:
        # A failure here is every rank's: the others read it instead of waiting for the deadline.
        try:
            helper = parent()
            if helper is None:
                raise HarnessSetUpError("cprr: rank 0 has no process for the harness's setUp "
                                        "(it is made before the worker loop)")
            answer = helper.set_up(cls, method)
        except HarnessSetUpError as e:
            answer = _helper.answer("error", str(e))
        _helper.write_whole(path, answer)
    else:
        while not os.path.exists(path):  # rank 0 gone before answering: the deadline ends it
            time.sleep(_helper.POLL_S)
        with open(path, "rb") as f:
            answer = f.read()
    return Spawn(answer)


class _Loader(pickle.Unpickler):
    def __init__(self, data, pipe):
        super().__init__(io.BytesIO(data))
        self._pipe = pipe

    def persistent_load(self, pid):
        if pid != _helper.PIPE:
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        return self._pipe


class Spawn:
    """What the harness's set-up left for the children of one test."""

    def __init__(self, answer):
        self._answer = answer
        head = pickle.loads(answer[:int.from_bytes(answer[:4], "little") + 4][4:])
        self.status, self.text, self.env, self.count, checks = head
        self.unchecked, self.expected_code = checks or (False, 0)

    def call(self, rank, pipe):
        """(target, args, kwargs) of the process the set-up started for `rank`, its pipe `pipe`."""
        offset = int.from_bytes(self._answer[:4], "little") + 4
        calls = _Loader(self._answer[offset:], pipe).load()
        return calls[rank]


# ---- a rank as the harness's child -------------------------------------------------------------


def _exit_code(e):
    """A SystemExit's status as the process's exit code would be (a message exits with 1)."""
    if e.code is None:
        return 0
    return e.code if isinstance(e.code, int) else 1


def _drain(conn):
    """What the child sent through its pipe, as texts, once it is done."""
    sent = []
    try:
        while conn.poll():
            sent.append(str(conn.recv()))
    except (EOFError, OSError):
        pass
    return sent


class _Environment:
    """Within the block, the environment has the parent's changes, as a child started by the
    parent would; after it, each variable the child left as the parent set it is as before."""

    def __init__(self, changes):
        self._changes = changes

    def __enter__(self):
        self._saved = {k: os.environ.get(k) for k in self._changes}
        _set_environment(self._changes)

    def __exit__(self, *exc):
        _set_environment({k: v for k, v in self._saved.items()
                          if os.environ.get(k) == self._changes[k]})


def _set_environment(values):
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def run_child(spawn, cls, rank, world_size):
    """Runs rank `rank`'s child entry as the set-up in `spawn` started it: its (exit code, what it
    sent through its pipe), which cprr.suites.harness_join judges as the harness's parent does. A
    set-up that skipped or failed, or started another number of processes, raises here."""
    if spawn.status == "skip":
        raise unittest.SkipTest(spawn.text)
    if spawn.status == "error":
        raise HarnessSetUpError(f"the harness's set-up failed:\n{spawn.text}")
    if spawn.count != world_size:
        raise HarnessSetUpError(
            f"cprr: {cls.__qualname__}.setUp started {spawn.count} process(es) for a world of "
            f"{world_size}: the ranks are the processes it starts, one each")
    mine, child = multiprocessing.Pipe()
    try:
        target, args, kwargs = spawn.call(rank, child)
        # The child's environment is the parent's: the user's, with what its set-up changed.
        # torchrun's variables, which cprr sets for every case, are the user's too (a test that
        # expects env:// to find no RANK finds none, as under its own harness).
        with _shim.user_environment(), _Environment(spawn.env):
            try:
                target(*args, **kwargs)
                code = 0
            except SystemExit as e:
                code = _exit_code(e)
        sent = _drain(mine)
    finally:
        mine.close()
        child.close()
    return code, sent

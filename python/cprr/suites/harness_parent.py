"""The parent side of PyTorch's ``MultiProcessTestCase`` harness, run once per execution of a test.

Under its own harness a test runs in a parent process (unittest's: ``setUpClass`` once, then per
test ``setUp``, which spawns one child per rank, a join, ``tearDown``) and in the children, each
of which runs the class's child entry ``cls._run(rank, test_name, file_name, pipe, **kwargs)``.
What the children get from the parent is what ``setUp`` made: the arguments of the processes it
started, its environment (``TEMP_DIR``, ``INIT_METHOD``, ...) and the files it created.

cprr's ranks are the children. The parent side runs in a helper process each rank 0 forks before
it imports the case files it has not imported yet (``start``; the helper imports them itself,
ahead or at a test's first set-up) and before its worker loop: the user's environment, no CUDA, no
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
import multiprocessing.process
import os
import pickle
import socket
import sys
import time
import traceback
import unittest

from cprr.distributed import shim as _shim

_PIPE = "cprr:child-pipe"  # the token standing for a child's end of its pipe in a pickled call
_POLL_S = 0.002  # how often a rank other than 0 looks for rank 0's answer


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
        """The helper's answer for test `method` of `cls` (pickled bytes: see `_answer`)."""
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


def start(imports=()):
    """Forks this rank's helper (rank 0, before it imports the case files of `imports`, which the
    helper imports itself, and before its worker loop: no CUDA, no communicator, no thread of
    the case's yet). Its end of the connection closes when this process exits."""
    global _PARENT
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # the child starts with empty buffers: nothing is printed twice
    mine, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        mine.close()
        status = 0
        try:
            _serve(theirs.detach(), list(imports))
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
            answer = _answer("error", str(e))
        write_whole(path, answer)
    else:
        while not os.path.exists(path):  # rank 0 gone before answering: the deadline ends it
            time.sleep(_POLL_S)
        with open(path, "rb") as f:
            answer = f.read()
    return Spawn(answer)


def write_whole(path, data):
    """Writes `data` at `path` whole or not at all: another rank never reads half of it."""
    partial = f"{path}.partial"
    with open(partial, "wb") as f:
        f.write(data)
    os.rename(partial, path)


class _Loader(pickle.Unpickler):
    def __init__(self, data, pipe):
        super().__init__(io.BytesIO(data))
        self._pipe = pipe

    def persistent_load(self, pid):
        if pid != _PIPE:
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


# ---- the helper --------------------------------------------------------------------------------


class _NotStarted:
    """A recorded process's stand-in for its running child (``Process._popen``): never started,
    never exits; terminating it does nothing (the harness's tearDown terminates its processes)."""

    returncode = None
    sentinel = -1

    def __init__(self, pid):
        self.pid = pid

    def poll(self, flag=None):
        return None

    def wait(self, timeout=None):
        return None

    def terminate(self):
        pass

    kill = terminate

    def close(self):
        pass


class _Recording:
    """Within the block, ``multiprocessing``'s Process.start records (target, args, kwargs)
    into `calls` instead of starting a process."""

    def __init__(self, calls):
        self.calls = calls

    def __enter__(self):
        calls = self.calls
        cls = multiprocessing.process.BaseProcess
        self._saved = cls.start

        def start(process):
            calls.append((process._target, tuple(process._args), dict(process._kwargs)))
            process._popen = _NotStarted(-len(calls))  # a pid no real process has

        cls.start = start
        return self

    def __exit__(self, *exc):
        multiprocessing.process.BaseProcess.start = self._saved


class _Saver(pickle.Pickler):
    def persistent_id(self, obj):
        return _PIPE if isinstance(obj, multiprocessing.connection.Connection) else None


def _pickled(obj, persistent=False):
    out = io.BytesIO()
    (_Saver(out) if persistent else pickle.Pickler(out)).dump(obj)
    return out.getvalue()


def _answer(status, text="", env=None, calls=(), checks=None):
    """The helper's answer: a length-prefixed head (status: "ok" | "skip" | "error", the skip's
    reason or the error's traceback, the environment's changes (None: removed), how many
    processes, the exit checks: `_exit_checks`) and the calls, pickled with each child's pipe as
    a token."""
    head = _pickled((status, text, env or {}, len(calls), checks))
    try:
        body = _pickled(list(calls), persistent=True)
    except Exception as e:
        head = _pickled(("error", "cprr: the processes the harness's setUp started cannot be "
                         f"handed to the ranks: their arguments do not pickle ({e})", {}, 0,
                         None))
        body = _pickled([])
    return len(head).to_bytes(4, "little") + head + body


def _env_changes(before):
    now = dict(os.environ)
    changes = {k: v for k, v in now.items() if before.get(k) != v}
    changes.update({k: None for k in before if k not in now})
    return changes


def _class_of(module, file, qualname):
    """The class `qualname` of module `module`, imported from `file` under that name if the
    helper has not imported it (a module rank 0 imported after the fork: pytest's collection)."""
    if module not in sys.modules and file:
        import importlib.util

        folder = os.path.dirname(os.path.abspath(file))
        if folder not in sys.path:
            sys.path.insert(0, folder)
        spec = importlib.util.spec_from_file_location(module, file)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[module] = loaded
        spec.loader.exec_module(loaded)
    obj = sys.modules[module]
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class _Helper:
    """The helper's state: the classes set up (and how), the test set up last."""

    def __init__(self):
        self.classes = {}  # class -> None, or ("skip" | "error", text) from its setUpClass
        self.pending = None  # the test whose tearDown is due

    def set_up_class(self, cls):
        if cls not in self.classes:
            self.classes[cls] = _outcome(cls.setUpClass)
        return self.classes[cls]

    def set_up(self, module, file, qualname, method):
        self.tear_down_late()
        found = []
        failed = _outcome(lambda: found.append(_class_of(module, file, qualname)))
        if failed is not None:
            return _answer(*failed)
        cls = found[0]
        failed = self.set_up_class(cls)
        if failed is not None:
            return _answer(*failed)
        test = cls(method)
        calls = []
        with _Recording(calls):
            failed = _outcome(test.setUp)
        if failed is not None:  # unittest runs no tearDown after a failed setUp
            return _answer(*failed)
        self.pending = test
        if not calls:
            return _answer("error", f"cprr: {qualname}.setUp started no process for {method}: "
                                    "the harness's setUp spawns the ranks (_spawn_processes)")
        return _answer("ok", env=_env_changes(_shim.USER_ENVIRONMENT), calls=calls,
                       checks=_exit_checks(test, method))

    def tear_down(self):
        """The pending test's tearDown, if any: None when it passed (or none was pending), else
        ("skip" | "error", text). One nobody asked for (rank 0 died before) is printed."""
        test, self.pending = self.pending, None
        if test is None:
            return None
        return _outcome(test.tearDown)

    def tear_down_late(self):
        failed = self.tear_down()
        if failed is not None and failed[0] == "error":
            print(f"cprr: the harness's tearDown failed:\n{failed[1]}", file=sys.stderr)

    def tear_down_when_done(self, conn, path, marks):
        """The tearDown of the test whose ranks leave their marks at `path`, once all have:
        its outcome is written to `path`.tear_down (pickled; whole or absent). A request that
        comes first (a rank never finished: the next set-up) leaves it to that request."""
        while not all(os.path.exists(m) for m in marks):
            if conn.poll(_POLL_S):
                return
        write_whole(f"{path}.tear_down", pickle.dumps(self.tear_down()))

    def tear_down_classes(self):
        for cls, failed in reversed(list(self.classes.items())):
            if failed is None:
                _outcome(cls.tearDownClass)


def _exit_checks(test, method):
    """How the harness's parent judges the children's exit codes for this test, as its setUp
    left them: (only an error exit fails: the test is in ``skip_return_code_checks``, the code
    a pass exits with: ``special_return_code_checks``, torch 2.x). Both are keyed by the test's
    own method, which the harness's wrapper (join_or_run) keeps as ``__wrapped__``."""
    fn = getattr(getattr(test, method, None), "__wrapped__", None)
    if fn is None:
        return (False, 0)
    unchecked = fn in (getattr(test, "skip_return_code_checks", None) or ())
    return (unchecked, int((getattr(test, "special_return_code_checks", None) or {}).get(fn, 0)))


def _outcome(fn):
    """None when ``fn()`` returned, else ("skip", reason) or ("error", traceback)."""
    try:
        fn()
    except unittest.SkipTest as e:
        return ("skip", str(e) or "unittest.SkipTest")
    except BaseException:
        return ("error", traceback.format_exc())
    return None


def _quiet_inherited(keep):
    """Points every descriptor the helper inherited, but stdio and `keep`, at /dev/null: rank 0's
    control channel and sockets must close when rank 0 does, not when its helper does. The
    numbers stay taken, so no Python object that still holds one closes a file of the helper's."""
    null = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in (keep, null):
            try:
                os.dup2(null, fd)
            except OSError:
                pass  # the listing's own descriptor, closed by now


def _serve(fd, imports):
    """The helper's loop: set-up requests until rank 0 closes the connection. First it imports
    the case files of `imports` (rank 0 imports them after the fork: a file whose import starts
    CUDA, as torch 2.x's common_cuda does, would leave a forked helper unable to use CUDA); an
    import that fails is rank 0's to report."""
    _quiet_inherited(fd)
    os.environ.clear()
    os.environ.update(_shim.USER_ENVIRONMENT)  # the harness's parent runs in the user's
    if imports:
        from cprr.suites import case_files as _case_files

        _case_files.load_cases(imports)
    conn = multiprocessing.connection.Connection(fd)
    helper = _Helper()
    try:
        while True:
            try:
                kind, *request = conn.recv()
            except EOFError:
                return
            if kind == "set_up":
                conn.send_bytes(helper.set_up(*request))
            elif kind == "tear_down":
                helper.tear_down_when_done(conn, *request)
    finally:
        helper.tear_down_late()
        helper.tear_down_classes()


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

"""The helper process that runs the parent side of PyTorch's ``MultiProcessTestCase`` harness
for one rank 0 (cprr.suites.harness_parent forks it and holds its connection).

It answers two requests. ``set_up``: the class's ``setUpClass`` (once) and the test's ``setUp``,
with process creation recorded instead of done (``multiprocessing``'s ``Process.start``:
``_spawn_processes``, ``_fork_processes`` and any other way through ``multiprocessing``); the
answer (`answer`) is the recorded targets and arguments (each child's pipe replaced by the token
`PIPE`), its environment's changes and how the harness would judge the exit codes, pickled.
``tear_down``: the test's ``tearDown`` once every rank has left its mark, its outcome written
next to the marks. A tearDown nobody asked for runs before the next set-up or at the end.

Imports neither torch nor the compiled module.
"""

import io
import multiprocessing.connection
import multiprocessing.process
import os
import pickle
import sys
import traceback
import unittest

from cprr.distributed import shim as _shim

PIPE = "cprr:child-pipe"  # the token standing for a child's end of its pipe in a pickled call
POLL_S = 0.002  # how often a rank looks for another's file (an answer, a mark)


def write_whole(path, data):
    """Writes `data` at `path` whole or not at all: another rank never reads half of it."""
    partial = f"{path}.partial"
    with open(partial, "wb") as f:
        f.write(data)
    os.rename(partial, path)


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
        return PIPE if isinstance(obj, multiprocessing.connection.Connection) else None


def _pickled(obj, persistent=False):
    out = io.BytesIO()
    (_Saver(out) if persistent else pickle.Pickler(out)).dump(obj)
    return out.getvalue()


def answer(status, text="", env=None, calls=(), checks=None):
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
            return answer(*failed)
        cls = found[0]
        failed = self.set_up_class(cls)
        if failed is not None:
            return answer(*failed)
        test = cls(method)
        calls = []
        with _Recording(calls):
            failed = _outcome(test.setUp)
        if failed is not None:  # unittest runs no tearDown after a failed setUp
            return answer(*failed)
        self.pending = test
        if not calls:
            return answer("error", f"cprr: {qualname}.setUp started no process for {method}: "
                                    "the harness's setUp spawns the ranks (_spawn_processes)")
        return answer("ok", env=_env_changes(_shim.USER_ENVIRONMENT), calls=calls,
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
            if conn.poll(POLL_S):
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


def serve(fd, import_cases=None):
    """The helper's loop: set-up requests until rank 0 closes the connection. First it runs
    `import_cases`, if given: the import of the case files rank 0 imports after the fork (a file
    whose import starts CUDA, as torch 2.x's common_cuda does, would leave a forked helper unable
    to use CUDA); an import that fails is rank 0's to report. The loader is handed in by the
    rank (cprr.rank.worker_loop), so this room's case-file loader is not imported here."""
    _quiet_inherited(fd)
    os.environ.clear()
    os.environ.update(_shim.USER_ENVIRONMENT)  # the harness's parent runs in the user's
    if import_cases is not None:
        import_cases()
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

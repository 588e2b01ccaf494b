"""What the Python unit tests share: fakes of the native side, and the one way to start the
build's tools.

FakeNative stands for the _cprr module's CaseContext (python/native/bindings.cpp: the same
methods, arguments and defaults) and does with each call what the rank's Context does with it
that a test can see: track() returns increasing buffer ids (1, 2, ...) and adds a tensor made
and written by an op to that op's writes; library_op() returns the op's seq (its index in `log`);
enter_collective() returns sequence numbers of its own. Tests import it (``from conftest import
FakeNative``) and subclass it for special behaviour.

run_tool starts a tool of the build (cprecord, cpreplay) or this interpreter with this build's
package first on PYTHONPATH, so that every end-to-end test runs the cprr under test and fails
plainly when the build lacks the tool; record_python (cprecord --python) and run_pytest (pytest
with cprr's plugin) are its common forms.
"""

import collections
import os
import subprocess
import sys

import pytest

# torch before the compiled module, as a rank imports them (cprr.rank.worker_loop)
import torch  # noqa: F401

import cprr
from cprr import _cprr

# A track() call: what the capture told the native side of a tensor's memory.
Track = collections.namedtuple(
    "Track", "name address bytes device native_stream written_by symmetric_offset")


class FakeAllocation:
    """An arena allocation (the binding's Allocation)."""

    def __init__(self, id, address, bytes, device):
        self.id, self.address, self.bytes, self.device = id, address, bytes, device


class FakeCprr:
    """The compiled module's own calls (the _cprr module, not a case's CaseContext), recorded: the
    CUPTI count of work outside the op log (python/native/unseen_work.h) and cprr's byte counts as
    torch's allocator. `calls`: "enter", "leave", "forgive", ("start", libraries),
    ("watch", on), "take", "reset" in order; `why`: what unseen_start answers ("" : counting)."""

    def __init__(self, why=""):
        self.calls = []
        self.why = why
        self.unseen = {}  # what unseen_take hands out next
        self.allocated, self.peak = 0, 0

    def seen_enter(self):
        self.calls.append("enter")

    def seen_leave(self):
        self.calls.append("leave")

    def unseen_forgive(self):
        self.calls.append("forgive")

    def unseen_start(self, libraries):
        self.calls.append(("start", list(libraries)))
        return self.why

    def unseen_watch(self, on):
        self.calls.append(("watch", on))

    def unseen_take(self):
        self.calls.append("take")
        taken, self.unseen = self.unseen, {}
        return taken

    def torch_memory(self):
        return self.allocated, self.peak

    def reset_torch_peak(self):
        self.calls.append("reset")
        self.peak = self.allocated


class FakeNative:
    """The binding's CaseContext, recording. `log`: every op and ordering, as dicts (kind, name,
    stream, native_stream, reads, writes, event), collectives too (kind "collective");
    `tracks`: Track per track() call; `freed`: (buffer, stream) per untrack(); `collectives`:
    ("enter", seq, fingerprint), ("complete", seq), ("p2p", kind, peer, dtype, bytes)."""

    def __init__(self, rank=0, world_size=1, seed=0, case_name="test/case", params=None,
                 backend="cpu", device_index=-1, transport=_cprr.Transport.gloo,
                 first_collective=100, execution=1):
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.execution = execution
        self.case_name = case_name
        self.params = dict(params or {})
        self.backend, self.device_index = backend, device_index
        self.transport = transport
        self.address = 0  # no CaseContext: the C++ op capture calls these methods instead
        self.log, self.tracks, self.freed, self.collectives = [], [], [], []
        self.captures, self.unseen, self.allocations = [], [], []
        self.released = []  # what torch_released() hands out next (cprr's arena as torch's)
        self.record_streams = []  # (address, native_stream) per torch_record_stream()
        self._next_collective = first_collective
        self.entered_in = []  # (group, members, where) per enter_collective / enter_p2p
        self.groups = []  # note_group's arguments
        self.splits = []  # (send_bytes, recv_bytes, row_bytes) per enter_collective
        self.sync_after = set()  # seqs a replay's sync bisection syncs after (library_op says)
        self.syncs = []  # len(log) at each synchronize_library()
        self.probe_holds = []  # ("hold" | "release", len(log)) of a declared block
        self.graph_calls = []  # ("begin", stream), ("end", stream), ("launch", graph, stream, native)
        self.graph_sync = False  # what graph_launch says of a replay's sync
        self.distrusted = []  # distrust_transport's reasons

    def capture(self, is_output, name, address, bytes, dtype, shape, native_stream, host=False):
        self.captures.append((is_output, name, address, bytes, dtype, list(shape),
                              native_stream, host))

    def enter_collective(self, kind, dtype, bytes, root, op, stream, group=0, members=0,
                         where="", send_bytes=(), recv_bytes=(), row_bytes=0):
        seq = self._next_collective
        self._next_collective += 7  # not 0, 1, 2...: callers must hand back what they got
        self.collectives.append(("enter", seq, (kind, dtype, bytes, root, op)))
        self.entered_in.append((group, members, where))
        self.splits.append((list(send_bytes), list(recv_bytes), row_bytes))
        self._append("collective", kind, stream)
        return seq

    def complete_collective(self, seq):
        self.collectives.append(("complete", seq))

    def collective_raised(self, seq):
        self.collectives.append(("raised", seq))

    def enter_p2p(self, kind, peer, dtype, bytes, group=0, members=0, where=""):
        seq = self._next_collective
        self._next_collective += 7
        self.collectives.append(("p2p", kind, peer, dtype, bytes))
        self.entered_in.append((group, members, where))
        return seq

    def note_group(self, id, ranks, backend, name):
        self.groups.append((id, list(ranks), backend, name))

    def track(self, name, address, bytes, device, native_stream, written_by,
              symmetric_offset=-1):
        self.tracks.append(Track(name, address, bytes, device, native_stream, written_by,
                                 symmetric_offset))
        buffer = len(self.tracks)
        if written_by >= 0:
            self.log[written_by]["writes"].append((buffer, 0, bytes))
        return buffer

    def untrack(self, buffer, stream):
        self.freed.append((buffer, stream))

    def library_op(self, kind, name, stream, native_stream, reads, writes, moves=False,
                   touches=()):
        self._append(kind, name, stream, native_stream, reads, writes, moves=moves)
        if touches:  # only a declared call's (cprr.accesses' uses)
            self.log[-1]["touches"] = list(touches)
        return len(self.log) - 1, len(self.log) - 1 in self.sync_after

    def library_order(self, kind, name, stream, event):
        self._append(kind, name, stream, event=event)

    def graph_begin(self, stream):
        self.graph_calls.append(("begin", stream))

    def graph_end(self, stream):
        self.graph_calls.append(("end", stream))
        return sum(1 for c in self.graph_calls if c[0] == "end") - 1

    def graph_launch(self, graph, stream, native_stream):
        self.graph_calls.append(("launch", graph, stream, native_stream))
        return len(self.log), self.graph_sync

    def synchronize_library(self):
        self.syncs.append(len(self.log))

    def hold_probe(self):
        self.probe_holds.append(("hold", len(self.log)))

    def release_probe(self):
        self.probe_holds.append(("release", len(self.log)))

    def distrust_transport(self, why):
        self.distrusted.append(why)

    def note_unseen(self, what):
        self.unseen.append(what)

    def torch_released(self):
        out, self.released = self.released, []
        return out

    def torch_record_stream(self, address, native_stream):
        self.record_streams.append((address, native_stream))

    def alloc(self, name, bytes, pool):
        self.allocations.append(FakeAllocation(len(self.allocations) + 1, 0, bytes,
                                               pool != "host" and self.backend == "cuda"))
        return self.allocations[-1]

    def free(self, id):
        pass

    def _append(self, kind, name, stream, native_stream=0, reads=(), writes=(), event=-1,
                moves=False):
        self.log.append(dict(kind=kind, name=name, stream=stream, native_stream=native_stream,
                             reads=list(reads), writes=list(writes), event=event, moves=moves))

    # ---- views for the tests ----------------------------------------------------------------

    @property
    def ops(self):
        """(name, reads, writes) of the access ops, in order."""
        return [(o["name"], o["reads"], o["writes"]) for o in self.log
                if o["kind"] in ("kernel", "copy", "host")]

    def fingerprints(self):
        """The collectives entered, as (kind, dtype, bytes, root, op)."""
        return [e[2] for e in self.collectives if e[0] == "enter"]


# ---- the build's tools ---------------------------------------------------------------------------

# The directory holding the cprr package the tests import (build/python), and the cprecord beside
# it in the build tree unless CPRR_CPRECORD names one (ctest sets it). The other tools (cpreplay)
# are cprecord's siblings.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cprr.__file__)))
CPRECORD = os.environ.get("CPRR_CPRECORD") or os.path.join(
    os.path.dirname(PACKAGE_ROOT), "tools", "cprecord")


def tool_path(tool="cprecord"):
    """The build's `tool`: CPRECORD, or its sibling of that name (cpreplay). Fails the test,
    saying where it looked, when nothing executable is there: a build without its tools is named
    as such, not as a FileNotFoundError or a tool's odd output."""
    path = CPRECORD if tool == "cprecord" else os.path.join(os.path.dirname(CPRECORD), tool)
    if not os.access(path, os.X_OK):
        pytest.fail(f"no {tool} at {path}: set CPRR_CPRECORD")
    return path


def tool_env(pythonpath=(), env=None):
    """The environment a tool runs in: this process's, with PYTHONPATH this build's package
    first (its ranks import the cprr under test, not another one), then `pythonpath`, then what
    PYTHONPATH was; the variables of `env` go over those (a PYTHONPATH there replaces the one
    made)."""
    made = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [PACKAGE_ROOT, *map(str, pythonpath), os.environ.get("PYTHONPATH", "")]))
    made.update(env or {})
    return made


def run_tool(*args, tool="cprecord", pythonpath=(), env=None, cwd=None, timeout=300,
             stderr_into_stdout=False):
    """`tool ARGS...` run to its end in folder `cwd` (None: this one) with tool_env(pythonpath,
    env), killed after `timeout` s: the completed process, its output as text. stdout and stderr
    apart (stdout is what --json printed), or with `stderr_into_stdout` in one, in the order the
    console shows them. `tool`: one of the build's tools by name (tool_path), or a program's
    absolute path (sys.executable, for pytest). Every test starts its processes of cprr here."""
    program = tool if os.path.isabs(tool) else tool_path(tool)
    return subprocess.run([program, *map(str, args)], env=tool_env(pythonpath, env), cwd=cwd,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT if stderr_into_stdout else subprocess.PIPE,
                          text=True, timeout=timeout)


def record_python(folder, *args, timeout=300, pythonpath=(), cwd=None, env=None):
    """`cprecord --python FOLDER --backend cpu ARGS...` by run_tool, its stdout and stderr apart.
    One world at a time (--jobs 1), the order the tests' expectations assume on any machine,
    unless ARGS give --jobs or --merge themselves."""
    given = [str(a) for a in args]
    jobs = [] if "--jobs" in given or "--merge" in given else ["--jobs", "1"]
    return run_tool("--python", folder, "--backend", "cpu", *jobs, *args, pythonpath=pythonpath,
                    env=env, cwd=cwd, timeout=timeout)


def run_pytest(cwd, *args, pythonpath=()):
    """pytest with cprr's plugin on cpu (-v) in folder `cwd`, by run_tool: this interpreter, with
    the build's cprecord as CPRR_CPRECORD (the plugin records its items with it) and `pythonpath`
    after the package; stderr in stdout, as a user reads pytest's report. (Not pytest_*: pytest
    takes a conftest's pytest_* functions for hooks.)"""
    return run_tool("-m", "pytest", "-p", "cprr.pytest_plugin", "-p", "no:cacheprovider",
                    "--cprr-backend", "cpu", "-v", *args, tool=sys.executable,
                    pythonpath=pythonpath, env={"CPRR_CPRECORD": tool_path("cprecord")}, cwd=cwd,
                    stderr_into_stdout=True)

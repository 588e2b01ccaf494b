"""Which case files a template must leave to its ranks: a file that reads a rank's variables at
import (Megatron's ``Utils``: ``int(os.environ["RANK"])`` in a class body), initializes CUDA
(TE's fsdp conftest) or starts a thread would make every rank forked from the template wrong or
unusable (cprr.rank.template refuses to fork then). Such a file is imported by each rank after the
fork instead, with torchrun's variables of that rank set; every other file stays in the template,
imported once per run.

A file whose cases are all of PyTorch's multi-process TestCase family (cprr.suites.testcase) is
the exception to the rank's variables: its harness imports it in a parent and in children that
inherit the parent's environment, so what it reads of them at import (torch's DistributedTest:
WORLD_SIZE in its decorators) is the user's value in every process, never a rank's. The template
imports such a file with that environment, as the harness would, unless CUDA or a thread keeps it
in the ranks.

Found per file, by importing it first in a forked child of the template (``why_in_rank``), which
reports what the import did and exits: the template itself is never touched by it. The cost is
the file's own import once more per run (torch is imported already).

Imports neither torch nor the compiled module.
"""

import os
import sys
import threading

from cprr.api import case as _case
from cprr.distributed import shim as _shim
from cprr.suites import testcase as _suites

# A template serves worlds of every size as every rank: what it read of these would be wrong in
# most ranks. MASTER_ADDR and MASTER_PORT are the same in every world of a job
# (cprr.distributed.shim).
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                  "ROLE_RANK", "NODE_RANK")


def python_threads():
    """The threads other than the main one that run Python code, by name."""
    names = {t.ident: t.name for t in threading.enumerate()}
    return [names.get(ident, f"thread {ident}") for ident in sys._current_frames()
            if ident != threading.main_thread().ident]


def _what_import_does(import_target, target):
    """In the probe child: imports `target` with a spy on os.environ and says what of the above
    it did (empty: nothing; an import that fails without doing any is the template's to report)."""
    read = set()
    environ_class = type(os.environ)
    original = environ_class.__getitem__

    def spy(self, key):
        if key in RANK_VARIABLES:
            read.add(key)
        return original(self, key)

    environ_class.__getitem__ = spy  # this child exits after the import: nothing to restore
    os.environ.update(_shim.environment(0, 1))
    before = len(_case.registered_cases())
    try:
        import_target(target)
    except BaseException:
        pass
    added = _case.registered_cases()[before:]
    reasons = []
    if read and not (added and all(_suites.from_suite(d) for d in added)):
        reasons.append(f"reads {', '.join(sorted(read))}")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        reasons.append("initializes CUDA")
    threads = python_threads()
    if threads:
        reasons.append(f"starts thread(s) {', '.join(threads)}")
    return " and ".join(reasons)


def why_in_rank(import_target, target):
    """Why `target` must be imported in each rank rather than in the template (what its import
    does), or None: ``import_target(target)`` run in a forked child."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # the child starts with empty buffers: nothing is printed twice
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            quiet = os.open(os.devnull, os.O_WRONLY)  # the template prints what it imports
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            os.write(w, _what_import_does(import_target, target).encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    try:
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    return b"".join(chunks).decode("utf-8", "replace") or None

"""A Python rank's life around its cases: the calls of torch it wraps and the case files it
imports and registers (load), its worker loop (serve), pytest's session around it where its cases
are pytest's items, and, once its world is connected, the default process group
(_world_connected). What each case gets before its body: cprr.rank.case_setup.
"""

import functools
import sys

# torch before the compiled module: torch's NCCL and CUDA runtime are the ones loaded, not those
# the compiled module's library would bring. A rank whose interpreter has no torch still serves:
# each case file's failed import is then its problem (worker_loop.load), as the C++ worker
# reports a registration error. So cprr.worker imports the rank only after a template's own
# set-up.
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    from cprr.capture import native_capture as _native_capture
    from cprr.capture import op_capture as _op_capture
    from cprr.capture import symmetric as _symmetric
    from cprr.distributed import collectives as _collectives
    from cprr.distributed import process_group as _process_group
    from cprr.rank import torch_allocator as _torch_allocator

from cprr import _cprr  # noqa: E402
from cprr.api import case as _case
from cprr.api import running as _running
from cprr.distributed import shim as _shim
from cprr.rank import case_body as _case_body
from cprr.rank import import_probe as _import_probe
from cprr.rank.case_setup import Rank
from cprr.suites import case_files as _case_files
from cprr.suites import harness_parent as _harness_parent
from cprr.suites import scripts as _scripts


def load(cases, scripts=(), pytest=False, template=False, rank_argv=()):
    """Everything a rank does before its worker loop: wraps torch's calls, imports the case
    files and registers their cases, and the scripts of cprecord --torchrun (`scripts`: their
    JSON specs); `pytest`: pytest's items come later (register_more). A rank (`rank_argv`: its
    arguments) imports with torchrun's variables set, as a file that reads them at import
    expects; a `template` leaves such files to its ranks (cprr.rank.import_probe). Returns the rank
    the bodies read (a template's: empty)."""
    rank = Rank([] if template else list(rank_argv))
    rank.symmetric = _wrap_torch() if torch is not None else None
    if template:
        problems, rank.left_to_ranks = _case_files.load_leaving(cases, _import_probe.why_in_rank)
        for target, why in rank.left_to_ranks:
            print(f"cprr: {target} is imported by each rank, not once per run: its import {why}",
                  file=sys.stderr)
    else:
        if rank.catalog:
            _shim.set_catalog_environment()
        else:
            _shim.set_environment(rank.rank, rank.world_size)
            if rank.rank == 0:  # before the imports (it imports a test's file at its first
                _harness_parent.start()  # set-up); serve() ends it if no case needs it
        problems = _case_files.load_cases(cases)
    for problem in problems:
        _cprr.add_error(problem)
    for spec in scripts:
        try:
            _scripts.from_spec(spec)
        except ValueError as e:
            _cprr.add_error(str(e))
    if not cases and not scripts and not pytest:
        _cprr.add_error("no case files: pass --cases FILE (cprecord --python FILE does)")
    register_more(rank, _case.registered_cases())
    return rank


def _import_left_files(rank):
    """A forked rank's imports of the files its template left to it (load), with torchrun's
    variables of this rank set; their cases are registered as the template's were."""
    if not rank.left_to_ranks:
        return
    _shim.set_environment(rank.rank, rank.world_size)
    before = len(_case.registered_cases())
    problems = _case_files.load_cases([target for target, _ in rank.left_to_ranks])
    rank.left_to_ranks = []
    register_more(rank, _case.registered_cases()[before:], problems)


def register_more(rank, definitions, problems=()):
    """Registers cases (load's, then pytest's items) and the problems found with them."""
    for problem in problems:
        _cprr.add_error(problem)
    _case_body.register(definitions, _cprr, rank)
    for path in sorted({d.file for d in definitions if d.file}):
        _cprr.add_source_file(path)


def _wrap_torch():
    """Wraps torch's collectives and symmetric-memory calls, before any case file is imported
    (so a `from ... import` gets the wrapped ones), and pays torch's lazy imports now rather than
    in the first case. Returns torch's symmetric windows, or None where it has none."""
    _collectives.install()
    _keep_fatal_signals(torch)
    symmetric = _symmetric.install(_running.capture, _cprr.torch_allocator_used)
    _op_capture.warm_up(_native_capture.NativeOpCapture if _native_capture.available() else
                        _op_capture.OpCapture)
    return symmetric


def _keep_fatal_signals(torch):
    """A rank's fatal signals stay the process's own: it dies of them and the controller reports
    the signal and the rank's stderr. torch's handler that prints every thread's stack first
    (which the test harness's child turns on, MultiProcessTestCase.run_test) waits for each
    thread to answer, and a rank whose gloo aborted on a size mismatch stalled there: a crash
    became a hang."""
    if hasattr(torch._C, "_set_print_stack_traces_on_fatal_signal"):
        torch._C._set_print_stack_traces_on_fatal_signal = lambda print_stack_traces: None


def pytest_session(rank, spec, then):
    """pytest's session in this process (cprr.suites.pytest_items: `spec`): its items are
    registered, then ``then()`` runs in its run loop (the worker loop, or a template's fork loop)
    and gives the exit status."""
    from cprr.suites import pytest_items as _pytest_items

    def serve_items(definitions, problems):
        register_more(rank, definitions, problems)
        return then()

    return _pytest_items.within_session(spec, serve_items)


def collect_and_serve(rank, spec, argv):
    """A forked rank's pytest session, collected here with torchrun's variables of this rank
    set, then the worker loop."""
    rank.parse(argv[1:])
    _shim.set_environment(rank.rank, rank.world_size)
    return pytest_session(rank, spec, lambda: serve(rank, argv))


def serve(rank, argv):
    """The worker loop of the rank whose command line is `argv` (the worker, then the rank's own
    arguments); returns its exit status."""
    rank.parse(argv[1:])
    # cprr's allocator first: a file left to the rank may make CUDA tensors as it is imported.
    _start_harness_parent(rank)
    if torch is not None:
        _torch_allocator.use_cprr_allocator(rank, _cprr)
    _import_left_files(rank)
    if _harness_parent.parent() is not None and \
            not _harness_parent.needed(_case.registered_cases()):
        _harness_parent.stop()
    _cprr.on_connected(functools.partial(_world_connected, rank))
    status = _cprr.serve(argv)
    _case_body.flush()
    return status


def _start_harness_parent(rank):
    """Rank 0's helper for the parent side of the TestCase family (cprr.suites.harness_parent),
    forked now, before the files left to this rank are imported and before CUDA or the communicator
    start, where a case may need it: one is registered, or a file left to the rank may hold
    one. A rank without a template started it before its imports (load)."""
    if rank.rank != 0 or rank.catalog or _harness_parent.parent() is not None:
        return
    left = [target for target, _ in rank.left_to_ranks]
    if left or _harness_parent.needed(_case.registered_cases()):
        _harness_parent.start(functools.partial(_case_files.load_cases, left))


def _world_connected(rank, transport, device_index):
    """Once the world joined its communicator, before its first case (a standby world's while
    earlier cases run, so a fresh case does not wait for it): torch's default process group, the
    same for every case of every world (nothing a case left). Returns the start-up phase."""
    if torch is None:
        return ""
    if rank.backend == "cuda" and device_index >= 0:
        torch.cuda.set_device(device_index)
    _process_group.make_default(rank, transport, device_index)
    return "torch process group"

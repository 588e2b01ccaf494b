"""A Python rank's set-up around its cases: the libraries it loads and the calls of torch it
wraps, its case files and their registration (load), its worker loop (serve), once its world is
connected the default process group (_world_connected), and per rank process or per case
(Rank.prepare) the seeds, torch's CUDA trace hooks, the CUPTI count of work outside the op log and
cprr's arena as torch's CUDA allocator.
"""

import argparse
import functools
import glob
import inspect
import os
import random
import sys

# torch before the compiled module: torch's NCCL and CUDA runtime are the ones loaded, not those
# the compiled module's library would bring. A rank whose interpreter has no torch still serves:
# each case file's failed import is then its problem (load), as the C++ worker reports a
# registration error. So cprr.worker imports this module only after a template's own set-up.
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    import torch.distributed as dist

    from cprr import (_collectives, _gpu_hooks, _graphs, _groups, _native_capture, _op_capture,
                      _symmetric)

from cprr import (  # noqa: E402
    _case, _case_body, _case_files, _cprr, _harness_parent, _import_probe, _running, _scripts,
    _shim)


class Rank:
    """What the rank knows from its arguments, for the Python side of each case. A template
    registers the cases with one of these still empty; each rank forked from it fills it in."""

    def __init__(self, argv):
        self.gpu_hooks = False  # torch's CUDA trace hooks forward to the running case
        self.counter = None  # counts CUDA work outside the op log (the _cprr module), or None
        self.symmetric = None  # torch's symmetric windows (cprr._symmetric), where torch has them
        self.first_group = None  # the first group id of the running case (cprr._groups)
        self.left_to_ranks = []  # (file, why): what a template left to its ranks to import
        self.parse(argv)

    def parse(self, argv):
        ap = argparse.ArgumentParser(add_help=False)
        ap.add_argument("--rank", type=int, default=0)
        ap.add_argument("--world-size", type=int, default=1)
        ap.add_argument("--rendezvous", default="")
        ap.add_argument("--backend", default="cpu")
        ap.add_argument("--catalog", action="store_true")  # the run that only lists the cases
        known, _ = ap.parse_known_args(argv)
        self.catalog = known.catalog
        self.rank = known.rank
        self.world_size = known.world_size
        self.rendezvous = known.rendezvous
        self.backend = known.backend

    def prepare(self, native):
        """Everything a case needs before its body runs (`native`: its native context): returns
        its ``ctx.device``."""
        # (The default process group was made as the world connected: _world_connected.)
        device = _device(native)
        _shim.set_environment(self.rank, self.world_size)
        if torch is not None:
            self.first_group = _groups.case_started()
        _install_gpu_hooks(self, native)
        _start_counter(self, native)
        _seed_everything(native.seed)
        return device

    def end_groups(self, groups):
        """Ends the process groups a case made and left (cprr._running.made_group); the ids of
        every group the case made are free again."""
        if groups and torch is not None:
            _collectives.end_groups(groups)
        if self.first_group is not None:
            _groups.case_ended(self.first_group)
            self.first_group = None

    def op_capture(self, native, counter):
        """The op capture of a case (`counter`: the CUPTI count, or None): in C++ where it was
        built for this torch (cprr._native_capture), else the Python dispatch mode."""
        kind = _native_capture.NativeOpCapture if _native_capture.available() else \
            _op_capture.OpCapture
        return kind(native, native.backend == "cuda", counter,
                    allocator=_cprr.torch_allocator_used(), symmetric=self.symmetric)


# ---- each case -------------------------------------------------------------------------------


def _seed_everything(seed):
    """The recorded seed, the same on every rank (as PyTorch tests seed every rank alike)."""
    random.seed(seed)
    torch.manual_seed(seed)  # the CPU generator and every CUDA device's
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed & 0xFFFFFFFF)


def _device(native):
    """The case's ``ctx.device``: the rank's GPU on cuda (made current), else the CPU."""
    if native.backend == "cuda":
        torch.cuda.set_device(native.device_index)
        return torch.device("cuda", native.device_index)
    return torch.device("cpu")


def _make_process_group(rank, nccl, device_index):
    """The default process group, made once the world is connected (_world_connected) and kept
    by its cases: gloo on cpu; on cuda NCCL when every rank has a GPU of its own (`nccl`), gloo
    where ranks share one (NCCL refuses two ranks on one GPU), as cprr's own collectives choose.
    Not "cpu:gloo,cuda:nccl": dist.get_backend() would then say so, and cases choose their
    device by it being "nccl"."""
    if dist.is_initialized():
        return
    backend = "nccl" if nccl else "gloo"
    store = os.path.join(rank.rendezvous or ".", "torch_process_group")
    options = {}
    if nccl and "device_id" in inspect.signature(dist.init_process_group).parameters:
        # The NCCL communicator now, not at the first collective: torch's symmetric memory on
        # NCCL (symm_mem.empty) needs it, and dies of a null communicator without (torch 2.11).
        options["device_id"] = torch.device("cuda", device_index)
    dist.init_process_group(
        backend,
        init_method=f"file://{store}",
        rank=rank.rank,
        world_size=rank.world_size,
        **options,
    )


# ---- once per rank process, in its first cuda case (a template never touches CUDA) -----------


def _install_gpu_hooks(rank, native):
    """torch's CUDA trace hooks, forwarding to the running case (cprr._gpu_hooks)."""
    if rank.gpu_hooks or native.backend != "cuda":
        return
    rank.gpu_hooks = _gpu_hooks.install(_running.capture)
    _graphs.install(_running.capture)


def _cupti_libraries():
    """Where CUPTI may be: the loader's path, torch's own wheels, the CUDA toolkit."""
    found = ["libcupti.so", "libcupti.so.13", "libcupti.so.12"]
    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    for pattern in (f"{site}/nvidia/**/libcupti.so*",
                    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*",
                    "/usr/local/cuda*/lib*/libcupti.so*"):
        found += sorted(glob.glob(pattern, recursive=True))
    return found


def _start_counter(rank, native):
    """Counting the CUDA work no op of the op log covers (native/unseen_work.h) into
    `rank.counter` (False: it cannot). CPRR_UNSEEN_WORK=off leaves CUPTI to a profiler of the
    user's."""
    if rank.counter is not None or native.backend != "cuda":
        return
    if os.environ.get("CPRR_UNSEEN_WORK") == "off":
        why = "CPRR_UNSEEN_WORK=off"
    else:
        why = _cprr.unseen_start(_cupti_libraries())
    if why:
        print(f"cprr: CUDA work outside the op log is not counted: {why}", file=sys.stderr)
        rank.counter = False
    else:
        rank.counter = _cprr


# ---- once per rank process, before its worker loop --------------------------------------------


def load(cases, scripts=(), pytest=False, template=False, rank_argv=()):
    """Everything a rank does before its worker loop: wraps torch's calls, imports the case
    files and registers their cases, and the scripts of cprecord --torchrun (`scripts`: their
    JSON specs); `pytest`: pytest's items come later (register_more). A rank (`rank_argv`: its
    arguments) imports with torchrun's variables set, as a file that reads them at import
    expects; a `template` leaves such files to its ranks (cprr._import_probe). Returns the rank
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
    """pytest's session in this process (cprr._pytest_items: `spec`): its items are registered,
    then ``then()`` runs in its run loop (the worker loop, or a template's fork loop) and gives
    the exit status."""
    from cprr import _pytest_items

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
    use_cprr_allocator(rank)
    _import_left_files(rank)
    if _harness_parent.parent() is not None and \
            not _harness_parent.needed(_case.registered_cases()):
        _harness_parent.stop()
    _cprr.on_connected(functools.partial(_world_connected, rank))
    status = _cprr.serve(argv)
    _case_body.flush()
    return status


def _start_harness_parent(rank):
    """Rank 0's helper for the parent side of the TestCase family (cprr._harness_parent), forked
    now, before the files left to this rank are imported and before CUDA or the communicator
    start, where a case may need it: one is registered, or a file left to the rank may hold
    one. A rank without a template started it before its imports (load)."""
    if rank.rank != 0 or rank.catalog or _harness_parent.parent() is not None:
        return
    left = [target for target, _ in rank.left_to_ranks]
    if left or _harness_parent.needed(_case.registered_cases()):
        _harness_parent.start(left)


def _world_connected(rank, nccl, device_index):
    """Once the world joined its communicator, before its first case (a standby world's while
    earlier cases run, so a fresh case does not wait for it): torch's default process group, the
    same for every case of every world (nothing a case left). Returns the start-up phase."""
    if torch is None:
        return ""
    if rank.backend == "cuda" and device_index >= 0:
        torch.cuda.set_device(device_index)
    _make_process_group(rank, rank.backend == "cuda" and nccl, device_index)
    return "torch process group"


def use_cprr_allocator(rank):
    """cprr's device arena as torch's CUDA allocator, for every case of this cuda rank
    (native/torch_allocator.h): tensors are placed by the case's placement policy, as a C++
    case's buffers are, and a replay can move them. torch.cuda.change_current_allocator works only
    before torch first touches CUDA, so here, before the worker loop. CPRR_TORCH_ALLOCATOR=off
    (and CPRR_OP_CAPTURE=off, which this needs for record_stream) leaves torch's own; so does a
    torch without CUDAPluggableAllocator (before 2.0) or a case file that used CUDA on import.
    torch.cuda.memory_allocated, max_memory_allocated, memory_reserved and
    reset_peak_memory_stats answer from cprr's count (memory_statistics); the rest of torch's
    statistics (memory_stats, memory_snapshot) raise under any pluggable allocator."""
    if rank.backend != "cuda" or "off" in (os.environ.get("CPRR_TORCH_ALLOCATOR"),
                                            os.environ.get("CPRR_OP_CAPTURE")):
        return
    memory = getattr(torch.cuda, "memory", None)
    pluggable = getattr(memory, "CUDAPluggableAllocator", None)
    if pluggable is None or not hasattr(memory, "change_current_allocator"):
        print(f"cprr: torch {torch.__version__} has no CUDAPluggableAllocator: tensors keep "
              "torch's caching allocator (placement policies do not apply)", file=sys.stderr)
        return
    if torch.cuda.is_initialized():
        print("cprr: CUDA was initialized before the worker loop (at import?): tensors keep "
              "torch's caching allocator (placement policies do not apply)", file=sys.stderr)
        return
    library = os.path.join(os.path.dirname(os.path.abspath(_cprr.__file__)), "libcprr_pyrank.so")
    memory.change_current_allocator(pluggable(library, "cprr_torch_alloc", "cprr_torch_free"))
    _cprr.use_torch_allocator()
    memory_statistics(torch, _cprr)


def memory_statistics(torch, native):
    """torch.cuda's byte counts from cprr's allocator (torch's pluggable allocator has none): a
    case that checks it freed what it allocated works as under torch's caching allocator. cprr
    keeps no cache, so what is reserved is what is allocated. One device per rank: `device` is
    accepted and ignored. `native`: the _cprr module (torch_memory, reset_torch_peak)."""

    def memory_allocated(device=None):
        return native.torch_memory()[0]

    def max_memory_allocated(device=None):
        return native.torch_memory()[1]

    def reset_peak_memory_stats(device=None):
        native.reset_torch_peak()

    replacements = {
        "memory_allocated": memory_allocated,
        "max_memory_allocated": max_memory_allocated,
        "memory_reserved": memory_allocated,
        "max_memory_reserved": max_memory_allocated,
        "reset_peak_memory_stats": reset_peak_memory_stats,
        "reset_max_memory_allocated": reset_peak_memory_stats,
    }
    for name, fn in replacements.items():
        for module in (torch.cuda, torch.cuda.memory):
            if hasattr(module, name):
                setattr(module, name, fn)

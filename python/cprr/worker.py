"""The Python rank process: ``cprr-pyworker [--cases PATH]... <the rank's arguments>``.

cprecord and cpreplay start it as they start cpworker (``cprecord --python PATH...``). It imports
torch, wraps torch.distributed's collectives, imports the case files, registers their
``@cprr.case`` functions with the compiled rank runtime (``cprr._cprr``) and hands over to the
same worker loop as cpworker: the control protocol, the watchdog, the flight record, the arenas
and the capture hashing are cpworker's. What is Python's is each case's set-up: seeding, the
default process group, and the traceback of a failure.

With ``--template FD`` it does the same imports and registrations, then forks ranks on request
instead of being one (cprr._template): the controller starts one such process per run, and a
fresh world's ranks skip the seconds of imports.
"""

import argparse
import importlib
import importlib.util
import inspect
import os
import random
import sys
import traceback

from cprr import _case


def _is_test_file(name):
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _files_of(path):
    if os.path.isdir(path):
        found = []
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            found += [os.path.join(root, f) for f in sorted(files) if _is_test_file(f)]
        return found
    return [path]


def _import_file(path):
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)  # as pytest does: a test file imports its neighbours
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem in sys.modules:
        return sys.modules[stem]
    spec = importlib.util.spec_from_file_location(stem, path)
    if spec is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[stem] = module
    spec.loader.exec_module(module)
    return module


def load_cases(items):
    """Imports every file, directory of test files or module in `items`; returns the problems
    (one text per item that failed to import)."""
    problems = []
    for item in items:
        targets = _files_of(item) if os.path.exists(item) else [item]
        for target in targets:
            try:
                if os.path.exists(target):
                    _import_file(target)
                else:
                    importlib.import_module(target)
            except BaseException:  # a case file's SystemExit or syntax error is its problem
                problems.append(f"cannot import {target}:\n{traceback.format_exc()}")
    return problems


class _Rank:
    """What the rank knows from its arguments, for the Python side of each case. A template
    registers the cases with one of these still empty; each rank forked from it fills it in."""

    def __init__(self, argv):
        self.gpu_hooks = False  # torch's CUDA trace hooks forward to the running case
        self.counter = None  # counts CUDA work outside the op log (the _cprr module), or None
        self.symmetric = None  # torch's symmetric windows (cprr._symmetric), where torch has them
        self.parse(argv)

    def parse(self, argv):
        ap = argparse.ArgumentParser(add_help=False)
        ap.add_argument("--rank", type=int, default=0)
        ap.add_argument("--world-size", type=int, default=1)
        ap.add_argument("--rendezvous", default="")
        ap.add_argument("--backend", default="cpu")
        known, _ = ap.parse_known_args(argv)
        self.rank = known.rank
        self.world_size = known.world_size
        self.rendezvous = known.rendezvous
        self.backend = known.backend


def _seed_everything(seed):
    """The recorded seed, the same on every rank (as PyTorch tests seed every rank alike)."""
    import torch

    random.seed(seed)
    torch.manual_seed(seed)  # the CPU generator and every CUDA device's
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed & 0xFFFFFFFF)


def _device(native):
    import torch

    if native.backend == "cuda":
        torch.cuda.set_device(native.device_index)
        return torch.device("cuda", native.device_index)
    return torch.device("cpu")


def _ensure_process_group(rank, native):
    """The default process group, made by the world's first case and kept by pooled ones: gloo
    on cpu; on cuda NCCL when every rank has a GPU of its own, gloo where ranks share one (NCCL
    refuses two ranks on one GPU), as cprr's own collectives choose."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    backend = "nccl" if native.backend == "cuda" and native.nccl else "gloo"
    store = os.path.join(rank.rendezvous or ".", "torch_process_group")
    options = {}
    if backend == "nccl" and "device_id" in inspect.signature(dist.init_process_group).parameters:
        # The NCCL communicator now, not at the first collective: torch's symmetric memory on
        # NCCL (symm_mem.empty) needs it, and dies of a null communicator without (torch 2.11).
        import torch

        options["device_id"] = torch.device("cuda", native.device_index)
    dist.init_process_group(
        backend,
        init_method=f"file://{store}",
        rank=rank.rank,
        world_size=rank.world_size,
        **options,
    )


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a case that closed its stdout
            pass


def _install_gpu_hooks(rank, native):
    """Once per rank process, in its first cuda case (a template never touches CUDA)."""
    if rank.gpu_hooks or native.backend != "cuda":
        return
    from cprr import _gpu_hooks, _running

    rank.gpu_hooks = _gpu_hooks.install(_running.capture)


def _cupti_libraries():
    """Where CUPTI may be: the loader's path, torch's own wheels, the CUDA toolkit."""
    import glob

    import torch

    found = ["libcupti.so", "libcupti.so.13", "libcupti.so.12"]
    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    for pattern in (f"{site}/nvidia/**/libcupti.so*",
                    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*",
                    "/usr/local/cuda*/lib*/libcupti.so*"):
        found += sorted(glob.glob(pattern, recursive=True))
    return found


def _start_counter(rank, native):
    """Once per rank process on cuda: counting the CUDA work no op of the op log covers
    (native/unseen_work.h). CPRR_UNSEEN_WORK=off leaves CUPTI to a profiler of the user's."""
    if rank.counter is not None or native.backend != "cuda":
        return
    from cprr import _cprr

    if os.environ.get("CPRR_UNSEEN_WORK") == "off":
        why = "CPRR_UNSEEN_WORK=off"
    else:
        why = _cprr.unseen_start(_cupti_libraries())
    if why:
        print(f"cprr: CUDA work outside the op log is not counted: {why}", file=sys.stderr)
        rank.counter = False
    else:
        rank.counter = _cprr


def _use_cprr_allocator(rank):
    """cprr's device arena as torch's CUDA allocator, for every case of this cuda rank
    (native/torch_allocator.h): tensors are placed by the case's placement policy, as a C++
    case's buffers are, and a replay can move them. torch.cuda.change_current_allocator works only
    before torch first touches CUDA, so here, before the worker loop. CPRR_TORCH_ALLOCATOR=off
    (and CPRR_OP_CAPTURE=off, which this needs for record_stream) leaves torch's own; so does a
    torch without CUDAPluggableAllocator (before 2.0) or a case file that used CUDA on import.
    torch.cuda.memory_allocated, max_memory_allocated, memory_reserved and
    reset_peak_memory_stats answer from cprr's count (_memory_statistics); the rest of torch's
    statistics (memory_stats, memory_snapshot) raise under any pluggable allocator."""
    if rank.backend != "cuda" or "off" in (os.environ.get("CPRR_TORCH_ALLOCATOR"),
                                            os.environ.get("CPRR_OP_CAPTURE")):
        return
    import torch

    memory = getattr(torch.cuda, "memory", None)
    pluggable = getattr(memory, "CUDAPluggableAllocator", None)
    if pluggable is None or not hasattr(memory, "change_current_allocator"):
        print(f"cprr: torch {torch.__version__} has no CUDAPluggableAllocator: tensors keep "
              "torch's caching allocator (placement policies do not apply)", file=sys.stderr)
        return
    from cprr import _cprr

    if torch.cuda.is_initialized():
        print("cprr: CUDA was initialized before the worker loop (at import?): tensors keep "
              "torch's caching allocator (placement policies do not apply)", file=sys.stderr)
        return
    library = os.path.join(os.path.dirname(os.path.abspath(_cprr.__file__)), "libcprr_pyrank.so")
    memory.change_current_allocator(pluggable(library, "cprr_torch_alloc", "cprr_torch_free"))
    _cprr.use_torch_allocator()
    _memory_statistics(torch, _cprr)


def _memory_statistics(torch, native):
    """torch.cuda's byte counts from cprr's allocator (torch's pluggable allocator has none): a
    case that checks it freed what it allocated works as under torch's caching allocator. cprr
    keeps no cache, so what is reserved is what is allocated. One device per rank: `device` is
    accepted and ignored."""

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


def _report_outside(native, capture, counter):
    """What the case did that the op log cannot see, as one op the report names."""
    capture.finish()
    if counter:
        for what, n in counter.unseen_take().items():
            capture.outside[f"{what} outside any op the dispatcher saw"] = n
    if capture.outside:
        what = ", ".join(f"{n} {w}" for w, n in sorted(capture.outside.items()))
        native.note_unseen(f"{sum(capture.outside.values())} outside the op log: {what}")


def _cprr_allocator():
    from cprr import _cprr

    return _cprr.torch_allocator_used()


def _body(definition, rank):
    from cprr import _op_capture, _running
    from cprr._context import Context

    def run(native):
        try:
            device = _device(native)
            _ensure_process_group(rank, native)
            _install_gpu_hooks(rank, native)
            _start_counter(rank, native)
            _seed_everything(native.seed)
            ctx = Context(native, definition, device)
            if os.environ.get("CPRR_OP_CAPTURE") == "off":  # only to measure what capture costs
                with _running.running(native):
                    definition.body(ctx)
                return None
            counter = rank.counter or None
            if counter:
                counter.unseen_take()  # what the world did before this case is not the case's
                counter.unseen_watch(True)
            capture = _op_capture.OpCapture(native, native.backend == "cuda", counter,
                                            allocator=_cprr_allocator(),
                                            symmetric=rank.symmetric)
            try:
                with _running.running(native, capture), capture:
                    definition.body(ctx)
            finally:
                if counter:
                    counter.unseen_watch(False)
                _report_outside(native, capture, counter)
            return None
        except BaseException:  # a failure of the case: its traceback is the report
            return traceback.format_exc()
        finally:
            _flush()

    return run


def register(definitions, native_module, rank):
    seen = set()
    for d in definitions:
        if d.name in seen:
            native_module.add_error(f"case '{d.name}' is registered twice (again at {d.source})")
            continue
        seen.add(d.name)
        native_module.add_case(
            d.name, d.world_sizes, d.grid_text(), d.expect, d.timeout_s, d.description,
            d.seeded_bug, _body(d, rank))


def _split(argv):
    """The worker's own arguments (--cases, --template) and the rank's (the rest)."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--cases", action="append", default=[])
    ap.add_argument("--template", type=int, default=None)
    return ap.parse_known_args(argv)


def _load(cases):
    """Everything a rank does before its worker loop: imports torch, wraps its collectives,
    imports the case files and registers their cases. Returns the rank the bodies read."""
    try:
        import torch  # noqa: F401  first: its NCCL and CUDA runtime are the ones loaded
    except ImportError:
        torch = None
    from cprr import _cprr

    symmetric = None
    if torch is not None:
        from cprr import _collectives, _op_capture, _running, _symmetric

        _collectives.install()
        symmetric = _symmetric.install(_running.capture, _cprr_allocator)
        _op_capture.warm_up()  # torch's lazy imports, here rather than in the first case
    for problem in load_cases(cases):
        _cprr.add_error(problem)
    if not cases:
        _cprr.add_error("no case files: pass --cases FILE (cprecord --python FILE does)")
    rank = _Rank([])
    rank.symmetric = symmetric
    register(_case.registered_cases(), _cprr, rank)
    return rank


def _serve(rank, argv):
    """The worker loop of the rank `argv` (its whole command line: the worker, the worker's own
    arguments, the rank's) describes; returns its exit status."""
    from cprr import _cprr

    _, rest = _split(argv[1:])
    rank.parse(rest)
    _use_cprr_allocator(rank)
    status = _cprr.serve([argv[0]] + rest)
    _flush()
    return status


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    known, _ = _split(argv)
    if known.template is not None:
        from cprr import _template

        _template.die_with_parent()
        # torch >= 2.0 then answers a case file's import-time torch.cuda.is_available() from
        # NVML instead of initializing the CUDA driver, which no forked rank could use. The
        # ranks get their own environment, without it.
        os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    rank = _load(known.cases)
    if known.template is not None:
        status = _template.serve(known.template, lambda rank_argv: _serve(rank, rank_argv))
        # As a rank leaves (worker.cpp's _Exit): static destructors would release the case
        # bodies, which takes the GIL of an interpreter already finalized, and hangs.
        _flush()
        os._exit(status)
    return _serve(rank, [sys.argv[0] if sys.argv else "cprr-pyworker"] + argv)


if __name__ == "__main__":
    sys.exit(main())

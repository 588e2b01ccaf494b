"""What a Python rank knows from its arguments (Rank), and what it sets up before each case body:
the device, torchrun's variables, the seeds, the case's first process-group id, torch's CUDA trace
hooks and the CUPTI count of work outside the op log, once per rank process in its first cuda
case (a template never touches CUDA).
"""

import argparse
import random
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
    from cprr.capture import gpu_hooks as _gpu_hooks
    from cprr.capture import graphs as _graphs
    from cprr.capture import native_capture as _native_capture
    from cprr.capture import op_capture as _op_capture
    from cprr.distributed import backends as _backends
    from cprr.distributed import groups as _groups
    from cprr.distributed import rpc_state as _rpc_state
    from cprr.rank import unseen_work as _unseen_work

from cprr import _cprr  # noqa: E402
from cprr.api import running as _running
from cprr.distributed import shim as _shim


class Rank:
    """What the rank knows from its arguments, for the Python side of each case. A template
    registers the cases with one of these still empty; each rank forked from it fills it in."""

    def __init__(self, argv):
        self.gpu_hooks = False  # torch's CUDA trace hooks forward to the running case
        self.counter = None  # counts CUDA work outside the op log (the _cprr module), or None
        # torch's symmetric windows (cprr.capture.symmetric), where torch has them
        self.symmetric = None
        self.first_group = None  # the first group id of the running case (cprr.distributed.groups)
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
        # (The default process group was made as the world connected: cprr.rank.worker_loop.)
        device = _device(native)
        _shim.set_environment(self.rank, self.world_size)
        if torch is not None:
            self.first_group = _groups.case_started()
        _install_gpu_hooks(self, native)
        _unseen_work.start_counter(self, native, _cprr)
        _seed_everything(native.seed)
        return device

    def end_case(self, native, groups):
        """Ends the process groups a case made and left (cprr.api.running.made_group); the ids of
        every group the case made are free again. A case that left torch's RPC state behind
        (cprr.distributed.rpc_state) has its world replaced: the next case never inherits it."""
        if groups and torch is not None:
            _groups.end_groups(groups)
        if torch is not None:
            _backends.restore_world()
            left = _rpc_state.left_over()
            if left:
                native.distrust_transport(f"the case left {left}")
        if self.first_group is not None:
            _groups.case_ended(self.first_group)
            self.first_group = None

    def op_capture(self, native, counter):
        """The op capture of a case (`counter`: the CUPTI count, or None): in C++ where it was
        built for this torch (cprr.capture.native_capture), else the Python dispatch mode."""
        kind = _native_capture.NativeOpCapture if _native_capture.available() else \
            _op_capture.OpCapture
        return kind(native, native.backend == "cuda", counter,
                    allocator=_cprr.torch_allocator_used(), symmetric=self.symmetric)


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


def _install_gpu_hooks(rank, native):
    """torch's CUDA trace hooks, forwarding to the running case (cprr.capture.gpu_hooks)."""
    if rank.gpu_hooks or native.backend != "cuda":
        return
    rank.gpu_hooks = _gpu_hooks.install(_running.capture)
    _graphs.install(_running.capture)

"""The ``ctx`` a Python case body receives.

Imports torch only in the calls that need it: ``import cprr`` (the pytest plugin's, the
controller's) imports this module and must not import torch.
"""

import os
import tempfile
from typing import Any, Dict

from cprr.api import running as _running


class Context:
    """What a case body gets: who it is, its parameters, and the calls that record its results.

    rank, world_size, seed: this rank, the world's size, the case's recorded seed (torch, random
    and numpy are seeded from it before the body runs). params: the grid point (texts);
    param(axis): one value with the type the grid gave it. device: ``cuda:<i>`` on the cuda
    backend (this rank's GPU), else ``cpu``. group: the default process group (gloo on cpu, nccl
    on cuda with a GPU per rank, gloo where ranks share a GPU), made once per world.
    """

    def __init__(self, native, definition, device, shared_dir=""):
        self._native = native
        self._shared_dir = shared_dir  # the world's rendezvous directory
        self._definition = definition
        self._keep = []  # temporaries a capture reads after this call returns (device copies)
        self._symmetric = 0
        self.rank: int = native.rank
        self.world_size: int = native.world_size
        self.seed: int = native.seed
        self.name: str = native.case_name
        self.params: Dict[str, str] = dict(native.params)
        self.device = device

    @property
    def group(self):
        import torch.distributed as dist

        return dist.group.WORLD

    def param(self, axis: str) -> Any:
        """The value of grid axis `axis` at this grid point, as the grid wrote it."""
        if axis not in self.params:
            raise KeyError(
                f"case {self.name} has no parameter {axis!r} (its grid has: "
                f"{', '.join(sorted(self.params)) or 'no axes'})"
            )
        return self._definition.value_of(axis, self.params[axis])

    def shared_path(self, name: str) -> str:
        """A path the same on every rank of this execution and new for each execution (nothing
        is made there): in the world's rendezvous directory, which goes with the world. For a
        FileStore's file or a folder the ranks share."""
        folder = self._shared_dir or tempfile.gettempdir()
        return os.path.join(folder, f"{name}.{self._native.execution}")

    def output(self, name: str, tensor) -> None:
        """Records `tensor` as a result of the case: hashed (on its device, in its stream's
        order; no host copy) and compared across ranks' runs, fresh and pooled, and replays."""
        self._capture(True, name, tensor)

    def probe(self, name: str, tensor) -> None:
        """Records an intermediate value: replay compares probes in order to say where two runs
        first diverged."""
        self._capture(False, name, tensor)

    def symmetric_empty(self, *shape, dtype=None, name: str = None):
        """An uninitialized tensor in cprr's symmetric arena (an NCCL window on cuda): every rank
        must allocate its symmetric tensors in the same order and sizes, which cprr checks."""
        import torch

        from cprr.api import tensors as _tensors

        if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
            shape = tuple(shape[0])
        dtype = dtype or torch.float32
        size = _tensors.byte_size(shape, dtype)
        label = name or f"symmetric#{self._symmetric}"
        self._symmetric += 1
        a = self._native.alloc(label, size, "symmetric")
        t = _tensors.tensor_over(a.address, size, shape, dtype, self.device)
        capture = _running.capture()
        if capture is not None:
            capture.adopt(t, a.id)  # its ops are logged against the symmetric allocation
        return t

    def _capture(self, is_output: bool, name: str, tensor) -> None:
        import torch

        from cprr.api import tensors as _tensors

        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"ctx.{'output' if is_output else 'probe'}({name!r}, ...) takes a torch.Tensor, "
                f"got {type(tensor).__name__}"
            )
        capture = _running.capture()
        if capture is not None:
            capture.note(f"ctx.{'output' if is_output else 'probe'}('{name}')", reads=[tensor])
        t = tensor.detach()
        if not t.is_contiguous():
            t = t.contiguous()
            self._keep.append(t)
        stream = torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0
        self._native.capture(
            is_output,
            name,
            t.data_ptr(),
            _tensors.nbytes(t),
            _tensors.dtype_name(t),
            _tensors.shape_of(t),
            stream,
            host=not t.is_cuda,  # a CPU tensor, in a cuda case too (gloo's point-to-point)
        )

"""cprr for PyTorch tests: run ``@cprr.case`` functions as cprr cases.

A case is a plain test body that takes a ``ctx``::

    import torch
    import torch.distributed as dist
    import cprr

    @cprr.case(world_sizes=[2, 4], grid={"n": [1024, 65536]})
    def all_reduce_sum(ctx):
        x = torch.full((ctx.param("n"),), float(ctx.rank + 1), device=ctx.device)
        dist.all_reduce(x)
        ctx.output("sum", x)

``cprecord --python FILE...`` runs the cases of those files in cprr's worlds (pooled, fresh or
both), records them and judges them like C++ cases; ``cprr.script("train.py", argv=[[...]])``
declares a torchrun script as cases, and PyTorch's MultiProcessTestCase classes are cases as they
are; ``cpreplay --case N`` replays one. ``with cprr.accesses(name, reads=..., writes=...)``
declares what a call the dispatcher does not see (an extension's kernel) reads and writes. Importing
this package imports neither torch nor the compiled module: the controller never needs them.
"""

from cprr.api.case import CaseDefinition, case, registered_cases
from cprr.api.context import Context
from cprr.api.declared import accesses, declared
from cprr.suites.scripts import script

__all__ = ["accesses", "case", "CaseDefinition", "Context", "declared", "registered_cases",
           "script"]

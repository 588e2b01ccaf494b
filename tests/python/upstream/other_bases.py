"""Tests on the other bases torch ships for multi-process suites, written as their users write
them, each run under its own harness and under cprecord by compare_harness.py: FSDPTest (its
own child entry: a process group, barriers around the test), and where this torch has them,
DistributedTestBase (create_pg), DTensorTestBase (@with_comms) and MultiProcContinuousTest.
Nothing here is cprr's; not a pytest file (its name). CI's torch 1.13 on Python 3.11 imports
none of these bases: the file is for the GPU machine's torch 2.x."""

import torch
import torch.distributed as dist
from torch.testing._internal import common_distributed
from torch.testing._internal.common_utils import run_tests

try:
    from torch.testing._internal.common_fsdp import FSDPTest
except Exception:  # torch 1.13's common_fsdp does not import on Python 3.11 (a dataclass default)
    FSDPTest = None


if FSDPTest is not None:

    class FsdpStyleTest(FSDPTest):
        @property
        def world_size(self):
            return 2

        def _device(self):  # the harness's child set this rank's GPU, where there are GPUs
            return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")

        def test_sums_over_its_process_group(self):
            t = torch.full((4,), float(self.rank + 1), device=self._device())
            dist.all_reduce(t, group=self.process_group)
            self.assertEqual(t.tolist(), [3.0] * 4)

        def test_gathers_ranks(self):
            parts = [torch.zeros(1, device=self._device()) for _ in range(self.world_size)]
            dist.all_gather(parts, torch.tensor([float(self.rank)], device=self._device()))
            self.assertEqual([p.item() for p in parts], [0.0, 1.0])

        def test_needs_eight_gpus(self):
            if torch.cuda.device_count() < 8:
                import sys
                sys.exit(common_distributed.TEST_SKIPS["multi-gpu-8"].exit_code)


if hasattr(common_distributed, "DistributedTestBase"):  # torch >= 2.6

    class BaseStyleTest(common_distributed.DistributedTestBase):
        @property
        def world_size(self):
            return 2

        def test_create_pg_and_reduce(self):
            pg = self.create_pg("cpu")
            t = torch.arange(4, dtype=torch.float32) * (self.rank + 1)
            dist.all_reduce(t, group=pg)
            self.assertEqual(t.tolist(), [0.0, 3.0, 6.0, 9.0])


try:
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.testing._internal.distributed._tensor.common_dtensor import (
        DTensorTestBase, with_comms)
except ImportError:  # torch 1.13 has no DTensor
    DTensorTestBase = None

if DTensorTestBase is not None:

    class DTensorStyleTest(DTensorTestBase):
        @property
        def world_size(self):
            return 2

        @property
        def device_type(self):
            return "cpu"

        @property
        def backend(self):
            return "gloo"

        @with_comms
        def test_shard_then_replicate(self):
            mesh = self.build_device_mesh()
            full = torch.arange(8, dtype=torch.float32).reshape(4, 2)
            sharded = distribute_tensor(full, mesh, [Shard(0)])
            self.assertEqual(sharded.to_local().shape, (2, 2))
            self.assertEqual(sharded.redistribute(mesh, [Replicate()]).to_local(), full)


if __name__ == "__main__":
    run_tests()

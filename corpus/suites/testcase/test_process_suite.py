"""A suite written for PyTorch's own harness (MultiProcessTestCase: a process per rank per test),
with bugs planted as they are found in real suites. It runs unchanged under its own harness
(``python test_process_suite.py``) and under cprr (``cprecord --python
corpus/suites/testcase``), where each test method is a case ``ReduceSuiteTest.test_...@2``.

Planted: a module-level table one test rewrites in place (a state leak: a later test fails only
in a reused process), a collective whose size differs on the last rank (a collective mismatch),
a test that needs more GPUs than there are (a skip). Each beside its fixed twin.
"""

import torch
import torch.distributed as dist
from torch.testing._internal.common_distributed import MultiProcessTestCase, skip_if_lt_x_gpu
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)

# Scale factors per format, memoized at module level as quantization suites keep them. The
# amax test rewrites its format's entry in place: the bug. Each later test of the same process
# that reads that entry reads the rewritten one.
SCALES = {"fp8": [1.0, 1.0, 1.0, 1.0]}
# The twins' table: the bug rewrites SCALES in every process it runs in.
FIXED_SCALES = {"fp8": [1.0, 1.0, 1.0, 1.0]}


class ReduceSuiteTest(MultiProcessTestCase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()

    @property
    def world_size(self):
        return 2

    def _init(self):
        # NCCL takes one GPU per rank: ranks sharing a GPU talk through gloo.
        backend = "nccl" if torch.cuda.device_count() >= self.world_size else "gloo"
        dist.init_process_group(backend, init_method=f"file://{self.file_name}",
                                rank=self.rank, world_size=self.world_size)
        if torch.cuda.is_available():
            device = torch.device("cuda", self.rank % torch.cuda.device_count())
            torch.cuda.set_device(device)
            return device
        return torch.device("cpu")

    def _scaled_sum(self, table):
        device = self._init()
        t = torch.tensor(table["fp8"], device=device) * (self.rank + 1)
        dist.all_reduce(t)
        dist.destroy_process_group()
        return t

    def test_amax_updates_scales(self):
        device = self._init()
        amax = torch.tensor([float(self.rank + 2)], device=device)
        dist.all_reduce(amax, op=dist.ReduceOp.MAX)
        scales = SCALES["fp8"]  # the shared entry itself: the bug
        scales[0] = 1.0 / amax.item()
        self.assertAlmostEqual(scales[0], 1.0 / (self.world_size + 1))
        dist.destroy_process_group()

    def test_amax_updates_scales_fixed(self):
        device = self._init()
        amax = torch.tensor([float(self.rank + 2)], device=device)
        dist.all_reduce(amax, op=dist.ReduceOp.MAX)
        scales = list(FIXED_SCALES["fp8"])  # its own copy
        scales[0] = 1.0 / amax.item()
        self.assertAlmostEqual(scales[0], 1.0 / (self.world_size + 1))
        dist.destroy_process_group()

    def test_scaled_sum(self):
        t = self._scaled_sum(SCALES)
        expected = sum(r + 1 for r in range(self.world_size))
        self.assertEqual(t.tolist(), [float(expected)] * 4)

    def test_scaled_sum_fixed(self):
        t = self._scaled_sum(FIXED_SCALES)
        expected = sum(r + 1 for r in range(self.world_size))
        self.assertEqual(t.tolist(), [float(expected)] * 4)

    def test_shard_stats(self):
        device = self._init()
        tokens = 7  # the world size does not divide it: the last rank's shard is shorter
        per_rank = -(-tokens // self.world_size)
        mine = min(tokens, (self.rank + 1) * per_rank) - self.rank * per_rank
        stats = torch.ones(mine, 4, device=device)  # the bug: not padded to per_rank
        dist.all_reduce(stats)
        dist.destroy_process_group()

    def test_shard_stats_fixed(self):
        device = self._init()
        tokens = 7
        per_rank = -(-tokens // self.world_size)
        stats = torch.ones(per_rank, 4, device=device)
        dist.all_reduce(stats)
        self.assertEqual(stats.sum().item(), per_rank * 4 * self.world_size)
        dist.destroy_process_group()

    @skip_if_lt_x_gpu(8)
    def test_eight_gpus(self):
        device = self._init()
        t = torch.ones(8, device=device)
        dist.all_reduce(t)
        dist.destroy_process_group()

    @parametrize("dtype", [torch.float32, torch.float64])
    def test_broadcast(self, dtype):
        device = self._init()
        t = torch.arange(6, dtype=dtype, device=device) * (self.rank + 1)
        dist.broadcast(t, src=0)
        self.assertEqual(t.tolist(), list(range(6)))
        dist.destroy_process_group()


instantiate_parametrized_tests(ReduceSuiteTest)


class GatherDeviceTest(MultiProcessTestCase):
    """Generated per device type (GatherDeviceTestCPU, GatherDeviceTestCUDA), as device-generic
    distributed suites are."""

    @property
    def world_size(self):
        return 2

    def setUp(self):
        # Not super(): instantiate_device_type_tests copies this class, and the copies are no
        # subclass of it.
        MultiProcessTestCase.setUp(self)
        self._spawn_processes()

    def test_all_gather(self, device):
        backend = "nccl" if device.startswith("cuda") and \
            torch.cuda.device_count() >= self.world_size else "gloo"
        dist.init_process_group(backend, init_method=f"file://{self.file_name}",
                                rank=self.rank, world_size=self.world_size)
        if device.startswith("cuda"):
            device = torch.device("cuda", self.rank % torch.cuda.device_count())
        parts = [torch.empty(3, device=device) for _ in range(self.world_size)]
        dist.all_gather(parts, torch.full((3,), float(self.rank), device=device))
        self.assertEqual([p[0].item() for p in parts], [float(r) for r in range(self.world_size)])
        dist.destroy_process_group()


instantiate_device_type_tests(GatherDeviceTest, globals(), only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()

"""suites_bench's MultiProcessTestCase suite: 20 tests, each a short checked step at W=2 (an
all-reduce and a matmul), through PyTorch's own harness (a process per rank per test) or cprr."""

import torch
import torch.distributed as dist
from torch.testing._internal.common_distributed import MultiProcessTestCase
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)

TESTS = 20


class BenchTestCase(MultiProcessTestCase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()

    @property
    def world_size(self):
        return 2

    @parametrize("step", range(TESTS))
    def test_step(self, step):
        # NCCL takes one GPU per rank: ranks sharing a GPU talk through gloo.
        dist.init_process_group("nccl" if torch.cuda.device_count() >= 2 else "gloo",
                                init_method=f"file://{self.file_name}", rank=self.rank,
                                world_size=self.world_size)
        device = torch.device("cuda", self.rank % torch.cuda.device_count()) \
            if torch.cuda.is_available() else torch.device("cpu")
        x = torch.full((32, 32), float(self.rank + step), device=device)
        y = x @ x
        dist.all_reduce(y)
        self.assertEqual(y[0, 0].item(), 32 * sum((r + step) ** 2 for r in range(2)))
        dist.destroy_process_group()


instantiate_parametrized_tests(BenchTestCase)

if __name__ == "__main__":
    run_tests()

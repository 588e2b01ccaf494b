"""suites_bench's per-rank pytest suite: 20 items of a DistributedTest class at W=2, each a short
checked step (an all-reduce and a matmul)."""

import pytest
import torch
import torch.distributed as dist

from conftest import DistributedTest


class TestBenchItems(DistributedTest):
    world_size = 2

    @pytest.mark.parametrize("step", range(20))
    def test_step(self, step):
        rank = dist.get_rank()
        device = torch.device("cuda", rank % torch.cuda.device_count()) \
            if torch.cuda.is_available() else torch.device("cpu")
        x = torch.full((32, 32), float(rank + step), device=device)
        y = x @ x
        dist.all_reduce(y)
        assert y[0, 0].item() == 32 * sum((r + step) ** 2 for r in range(2))

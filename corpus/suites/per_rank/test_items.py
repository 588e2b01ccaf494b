"""Per-rank pytest items, DeepSpeed style (conftest.py's DistributedTest): every rank runs each
test; ``cprecord --pytest corpus/suites/per_rank`` makes each item a case.

Planted: a ZeRO config cached at module level that one test edits in place (a state leak: the
next test of the same process reads the edit), beside its twin.
"""

import os

import pytest
import torch
import torch.distributed as dist

from conftest import DistributedTest

# Parsed once per process, as DeepSpeed's config helpers cache them.
_CONFIG_CACHE = {}


def zero_config(stage, edit_in_place):
    config = _CONFIG_CACHE.setdefault(stage, {"stage": stage, "bucket": 4, "overlap": False})
    return config if edit_in_place else dict(config)


def bucketed_sum(device, config):
    t = torch.arange(16, dtype=torch.float32, device=device) * (dist.get_rank() + 1)
    for bucket in t.split(config["bucket"]):
        dist.all_reduce(bucket)
    return t


class TestZeroBuckets(DistributedTest):
    world_size = 2

    def test_a_small_buckets(self, device):
        config = zero_config(2, edit_in_place=True)
        config["bucket"] = 3  # the bug: the cached config itself
        t = bucketed_sum(device, config)
        assert t[5].item() == 5 * 3

    def test_b_default_buckets(self, device):
        config = zero_config(2, edit_in_place=True)
        assert config["bucket"] == 4, f"bucket {config['bucket']}: the cache was edited"
        bucketed_sum(device, config)

    def test_c_small_buckets_fixed(self, device):
        config = zero_config(3, edit_in_place=False)
        config["bucket"] = 3
        t = bucketed_sum(device, config)
        assert t[5].item() == 5 * 3

    def test_d_default_buckets_fixed(self, device):
        config = zero_config(3, edit_in_place=False)
        assert config["bucket"] == 4
        bucketed_sum(device, config)


class TestCheckpoint(DistributedTest):
    world_size = 2

    @pytest.mark.parametrize("shards", [1, 2])
    def test_save_then_load(self, tmp_path, device, shards):
        # Rank 0 writes, every rank reads: tmp_path is one folder for the world.
        path = tmp_path / f"model_{shards}.pt"
        if dist.get_rank() == 0:
            torch.save({"w": torch.arange(4.0) * shards}, path)
        dist.barrier()
        w = torch.load(path)["w"].to(device)
        dist.all_reduce(w)
        assert w.tolist() == [float(i * shards * dist.get_world_size()) for i in range(4)]

    @pytest.mark.world_size(4)
    def test_four_ranks(self, device):
        assert dist.get_world_size() == 4
        t = torch.ones(1, device=device)
        dist.all_reduce(t)
        assert t.item() == 4

    def test_eight_gpus(self):
        if torch.cuda.device_count() < 8:
            pytest.skip("needs 8 GPUs")


@pytest.mark.world_size(2)
def test_rank_environment():
    assert int(os.environ["RANK"]) == dist.get_rank()
    assert int(os.environ["WORLD_SIZE"]) == dist.get_world_size() == 2

"""PyTorch's own DistributedTest, as PyTorch's CI runs it (test/distributed/test_distributed_spawn.py),
from the installed torch: nothing of the suite is copied here. BACKEND (gloo | nccl) and WORLD_SIZE
come from the environment; TestDistBackend's setUp makes TEMP_DIR. Not a pytest file (its name):
tests/python/upstream/compare_harness.py runs it under its own harness and under cprecord."""

import os

import torch
from torch.testing._internal.common_utils import run_tests
from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend

BACKEND = os.environ["BACKEND"]

if BACKEND in ("gloo", "nccl", "ucc"):

    class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._spawn_processes()
            torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


if __name__ == "__main__":
    run_tests()

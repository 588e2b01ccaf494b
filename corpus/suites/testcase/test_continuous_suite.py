"""A suite written for PyTorch's continuous harness (MultiProcContinuousTest: one process per rank
for the whole class, fed test ids), with a bug planted as such suites have them. Under cprr
(``cprecord --python corpus/suites/testcase``) each test method is a case
``ContinuousSuiteTest.test_...@2``; the class's set-up (``_init_pg``) runs once per rank process, as the harness's worker runs it.

Planted: a cache on the class that one test fills with its own shapes and a later test reads (a
state leak: the harness itself runs them in one process, so it fails there too; cprr's fresh
world does not, and names the test that polluted it). Beside its fixed twin.
"""

import torch
import torch.distributed as dist
from torch.testing._internal import common_distributed

if not hasattr(common_distributed, "MultiProcContinuousTest"):  # torch < 2.8 (CI's 1.13)
    import continuous_stand_in  # noqa: F401  (tests/python/stand_ins: adds one)

from torch.testing._internal.common_distributed import MultiProcContinuousTest  # noqa: E402


class ContinuousSuiteTest(MultiProcContinuousTest):
    world_size = 2
    pg_inits = 0  # how often this rank process ran the class's set-up
    # Workspaces by name, kept across tests to save allocations: the bug. A test that sizes one
    # for itself leaves it to the next test that asks for the same name.
    workspaces = {}
    fixed_workspaces = {}

    @classmethod
    def backend_str(cls):
        # NCCL takes one GPU per rank: ranks sharing a GPU talk through gloo.
        return "nccl" if torch.cuda.device_count() >= cls.world_size else "gloo"

    @classmethod
    def _init_pg(cls, rank, world_size, rdvz_file):
        super()._init_pg(rank, world_size, rdvz_file)
        cls.pg_inits += 1

    @property
    def device(self):
        if torch.cuda.is_available():
            return torch.device("cuda", self.rank % torch.cuda.device_count())
        return torch.device("cpu")

    def _workspace(self, table, rows):
        return table.setdefault("gather", torch.zeros(rows * self.world_size, 4,
                                                      device=self.device))

    def test_a_gather_tokens(self):
        rows = 3
        out = self._workspace(self.workspaces, rows)
        dist.all_gather(list(out.chunk(self.world_size)),
                        torch.full((rows, 4), float(self.rank), device=self.device))
        self.assertEqual(out[rows:].sum().item(), rows * 4 * (self.world_size - 1))

    def test_b_gather_hidden(self):
        rows = 2
        out = self._workspace(self.workspaces, rows)  # sized by whoever asked first
        dist.all_gather(list(out.chunk(self.world_size)), torch.ones(rows, 4, device=self.device))
        self.assertEqual(out.shape[0], rows * self.world_size)

    def test_b_gather_hidden_fixed(self):
        rows = 2
        out = torch.zeros(rows * self.world_size, 4, device=self.device)
        dist.all_gather(list(out.chunk(self.world_size)), torch.ones(rows, 4, device=self.device))
        self.assertEqual(out.shape[0], rows * self.world_size)

    def test_set_up_once(self):
        # The harness's worker sets the class up once per process, before any test.
        self.assertEqual(type(self).pg_inits, 1)
        self.assertEqual(type(self).rank, dist.get_rank())
        self.assertIs(type(self).pg, dist.distributed_c10d._get_default_group())
        t = torch.ones(2, device=self.device) * (self.rank + 1)
        dist.all_reduce(t)
        self.assertEqual(t.tolist(), [3.0, 3.0])

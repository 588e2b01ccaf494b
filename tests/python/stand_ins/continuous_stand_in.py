"""A test-only stand-in for ``MultiProcContinuousTest``, which torch's
``torch.testing._internal.common_distributed`` has from 2.8 on (CI's Debian torch is 1.13): the
worker side of its API as torch 2.11 has it (the class attributes ``rank`` and ``world_size``,
``_init_pg``, ``_run_test_given_id``, ``_worker_loop``, ``_get_world_size``, ``backend_str``,
``opts``), added to
common_distributed when it lacks one, so cprr finds it where it finds torch's. The parent's side
(spawning a process per rank, feeding it test ids) is not here: its setUpClass skips.
"""

import inspect
import os
import unittest
from datetime import timedelta

import torch.distributed as c10d
from torch.testing._internal import common_distributed, common_utils


class MultiProcContinuousTest(common_utils.TestCase):
    world_size = -2
    rank = -2
    rdvz_file = None
    timeout = timedelta(seconds=120)

    @classmethod
    def backend_str(cls):
        return None

    @classmethod
    def device_type(cls):
        return "cpu"

    @classmethod
    def opts(cls, high_priority_stream=False):
        return None

    @classmethod
    def _init_pg(cls, rank, world_size, rdvz_file):
        os.environ["LOCAL_RANK"] = str(rank)
        store = c10d.FileStore(rdvz_file, world_size)
        c10d.init_process_group(backend=cls.backend_str(), world_size=world_size, rank=rank,
                                store=store, pg_options=cls.opts(), timeout=cls.timeout)
        cls.pg = c10d.distributed_c10d._get_default_group()

    @classmethod
    def _run_test_given_id(cls, test_id, **kwargs):
        test_name = test_id.rsplit(".", maxsplit=1)[-1]
        self = cls(test_name)
        self.rank = cls.rank
        self.world_size = cls.world_size
        test_fn = getattr(self, test_name)
        common_utils.set_rng_seed(common_utils.SEED)
        test_fn(**kwargs)

    @classmethod
    def _worker_loop(cls, rank, world_size, rdvz_file, task_queue, completion_queue):
        # The contract of torch 2.11's worker: set-up once, then each id from the task queue
        # answered in the completion queue with the id, a SkipTest, or a RuntimeError whose
        # cause is the test's exception; None ends the loop.
        cls.rank, cls.world_size = rank, world_size
        skipped = None
        try:
            cls._init_pg(rank, world_size, rdvz_file)
        except SystemExit as e:
            skips = [s for s in common_distributed.TEST_SKIPS.values() if s.exit_code == e.code]
            if not skips:
                raise
            skipped = skips[0].message
        while True:
            test_id = task_queue.get()
            if test_id is None:
                break
            if skipped is not None:
                completion_queue.put(unittest.SkipTest(skipped))
                continue
            try:
                cls._run_test_given_id(test_id)
                completion_queue.put(test_id)
            except BaseException as e:  # noqa: B036  (the harness's worker answers every error)
                wrapped = RuntimeError(f"Exception in worker process: {e!r}")
                wrapped.__cause__ = e
                completion_queue.put(wrapped)

    @classmethod
    def _get_world_size(cls, device_type):
        attr = inspect.getattr_static(cls, "world_size", None)
        if isinstance(attr, property):
            return attr.fget(object.__new__(cls))
        if cls.world_size == -2:
            raise unittest.SkipTest(f"No {device_type} devices available")
        return cls.world_size

    @classmethod
    def setUpClass(cls):
        raise unittest.SkipTest("the continuous harness's stand-in has no parent side")


if not hasattr(common_distributed, "MultiProcContinuousTest"):
    common_distributed.MultiProcContinuousTest = MultiProcContinuousTest

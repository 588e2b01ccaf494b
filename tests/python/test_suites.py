"""PyTorch's multi-process TestCase family run unchanged as cprr cases (cprr.suites.testcase).

End to end on corpus/suites/testcase (a MultiProcessTestCase suite with parametrized and device-type
generated classes, a MultiProcContinuousTest suite), through cprecord on cpu in both modes and
through the pytest plugin: every test method is a case ``Class.test_method@W``, each planted bug
gets the verdict of its ``@cprr.case`` twin (a state leak: a fresh-vs-pooled divergence that
cpreplay names with its polluter; a collective mismatch), the twins are clean, a skip is a skip,
and the continuous class's set-up runs once per rank process, its own _worker_loop running each
case (cprr.suites.continuous). In-process: what a rank runs for
one method (instance, rank, file_name), class skips and a world size that cannot be read.

CI's torch 1.13 needs tests/python/stand_ins: expecttest (which Debian lacks) and the continuous
harness (torch >= 2.8 has its own, which the GPU machine's runs use).
"""

import json
import os
import sys
import textwrap
import threading
import types
import unittest

import pytest
import torch

from conftest import record_python, run_pytest, run_tool

HERE = os.path.dirname(os.path.abspath(__file__))
STAND_INS = os.path.join(HERE, "stand_ins")
SUITES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "corpus", "suites", "testcase")
sys.path.insert(0, STAND_INS)  # this process imports the harness too (the in-process tests)

from torch.testing._internal.common_distributed import MultiProcessTestCase  # noqa: E402

from cprr.suites import harness_parent as _harness_parent  # noqa: E402
from cprr.suites import testcase as _suites  # noqa: E402

LEAK = {"ReduceSuiteTest.test_scaled_sum@2": "ReduceSuiteTest.test_amax_updates_scales@2",
        "ContinuousSuiteTest.test_b_gather_hidden@2": "ContinuousSuiteTest.test_a_gather_tokens@2"}
MISMATCH = "ReduceSuiteTest.test_shard_stats@2"
SKIP = "ReduceSuiteTest.test_eight_gpus@2"
CLEAN = ["ReduceSuiteTest.test_amax_updates_scales_fixed@2", "ReduceSuiteTest.test_scaled_sum_fixed@2",
         "ReduceSuiteTest.test_shard_stats_fixed@2", "ReduceSuiteTest.test_broadcast_float32@2",
         "ReduceSuiteTest.test_broadcast_float64@2", "GatherDeviceTestCPU.test_all_gather_cpu@2",
         "ContinuousSuiteTest.test_a_gather_tokens@2",
         "ContinuousSuiteTest.test_b_gather_hidden_fixed@2",
         "ContinuousSuiteTest.test_set_up_once@2", "ReduceSuiteTest.test_amax_updates_scales@2"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    db = tmp_path_factory.mktemp("suites") / "suites.db"
    run = record_python(SUITES, "--mode", "both", "--timeout", "20", "--db", db, "--json",
                        pythonpath=[STAND_INS])
    report = json.loads(run.stdout)
    return db, {c["label"]: c for c in report["cases"]}, run


def test_every_method_is_a_case_labelled_class_method_at_world_size(recorded):
    _, cases, run = recorded
    assert sorted(cases) == sorted([*LEAK, MISMATCH, SKIP, *CLEAN]), run.stderr[-3000:]
    assert run.returncode == 1, run.stderr[-3000:]  # the planted bugs are unexpected failures


def test_planted_bugs_get_their_twins_verdicts(recorded):
    _, cases, _ = recorded
    for victim in LEAK:  # a state leak: the pooled run fails after its polluter, fresh passes
        assert cases[victim]["fresh_vs_pool"], cases[victim]
        statuses = {e["mode"]: e["status"] for e in cases[victim]["executions"]}
        assert statuses == {"fresh": "pass", "pool": "fail"}, cases[victim]
    mismatch = cases[MISMATCH]
    assert mismatch["verdict"] == "collective_mismatch", mismatch
    assert "rank 0 has bytes 64, rank 1 has bytes 48" in mismatch["collective_mismatch"]["detail"]
    assert "test_process_suite.py:" in mismatch["collective_mismatch"]["detail"]


def test_twins_are_clean_and_a_skip_is_a_skip(recorded):
    _, cases, _ = recorded
    for label in CLEAN:
        case = cases[label]
        assert case["status"] == "pass" and not case["verdict"], case
        assert not case["fresh_vs_pool"] and case["as_expected"], case
    skip = cases[SKIP]
    assert skip["status"] == "skip" and skip["as_expected"], skip
    assert all("Need at least 8 CUDA devices" in e["summary"] for e in skip["executions"]), skip


def test_replay_names_each_leaks_polluter(recorded):
    db, cases, _ = recorded
    for victim, polluter in LEAK.items():
        run = run_tool("--db", db, "--case", cases[victim]["id"], tool="cpreplay",
                       pythonpath=[STAND_INS])
        lines = run.stdout.splitlines()
        assert lines and lines[0].endswith(f"{victim} (run 1): state_leak"), run.stdout + run.stderr
        assert f"case {cases[polluter]['id']} {polluter}" in run.stdout, run.stdout


def test_pytest_plugin_runs_the_classes_as_cprr_items(tmp_path):
    run = run_pytest(tmp_path, "--cprr-arg=--timeout=20", "-rs",
                     os.path.join(SUITES, "test_process_suite.py"), pythonpath=[STAND_INS])
    out = run.stdout
    assert "ReduceSuiteTest.test_broadcast_float32@2 PASSED" in out, out
    assert "GatherDeviceTestCPU.test_all_gather_cpu@2 PASSED" in out, out
    assert "ReduceSuiteTest.test_shard_stats@2 FAILED" in out, out
    assert "ReduceSuiteTest.test_eight_gpus@2 SKIPPED" in out, out
    assert "Need at least 8 CUDA devices" in out, out
    assert "2 failed, 7 passed, 1 skipped" in out, out  # pooled: scaled_sum fails after amax


def test_a_continuous_class_keeps_the_backend_its_set_up_asked_for(tmp_path):
    # A backend the world's group is not (gloo under another name): the class's set-up asks for
    # it once per rank process; every later test of the class, pooled, runs on it too.
    (tmp_path / "test_probe_suite.py").write_text(textwrap.dedent('''
        import torch
        import torch.distributed as dist
        from torch.testing._internal import common_distributed

        if not hasattr(common_distributed, "MultiProcContinuousTest"):  # torch < 2.8
            import continuous_stand_in  # noqa: F401

        from torch.testing._internal.common_distributed import MultiProcContinuousTest


        def _probe(store, rank, size, timeout):
            return dist.ProcessGroupGloo(store, rank, size, timeout)


        if not hasattr(dist.Backend, "CPRR_PROBE"):
            dist.Backend.register_backend("cprr_probe", _probe)


        class ProbeSuite(MultiProcContinuousTest):
            world_size = 2

            @classmethod
            def backend_str(cls):
                return "cprr_probe"

            def _sum(self):
                self.assertEqual(dist.get_backend(), "cprr_probe")
                t = torch.ones(2) * (self.rank + 1)
                dist.all_reduce(t)
                self.assertEqual(t.tolist(), [3.0, 3.0])

            def test_a(self):
                self._sum()

            def test_b(self):
                self._sum()
    '''))
    run = record_python(tmp_path, "--mode", "both", "--json", pythonpath=[STAND_INS])
    cases = {c["label"]: c for c in json.loads(run.stdout)["cases"]}
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(cases) == ["ProbeSuite.test_a@2", "ProbeSuite.test_b@2"], cases
    for label, case in cases.items():
        assert sorted((e["mode"], e["status"]) for e in case["executions"]) == \
            [("fresh", "pass"), ("pool", "pass")], case


# ---- in-process -------------------------------------------------------------------------------


def _module(source, name="suite_under_test"):
    module = types.ModuleType(name)
    exec(compile(textwrap.dedent(source), f"{name}.py", "exec"), module.__dict__)
    return module


class _Ctx:
    def __init__(self, rank, world_size=2, folder="/shared"):
        self.rank, self.world_size, self._folder = rank, world_size, folder

    def shared_path(self, name):
        return os.path.join(self._folder, f"{name}.7")


def _ranks_run(case, world_size, folder):
    """`case`'s body in each rank of a world, each rank on a thread of its own (a rank waits for
    rank 0's helper, which runs the harness's set-up): what each raised, or None."""
    raised = {}

    def rank_body(rank):
        try:
            case.body(_Ctx(rank, world_size, str(folder)))
            raised[rank] = None
        except BaseException as e:  # noqa: B902  the case body's failures are what we check
            raised[rank] = e

    threads = [threading.Thread(target=rank_body, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), f"{case.name}: a rank did not finish"
    return [raised[r] for r in range(world_size)]


def test_each_test_method_is_a_case_at_the_class_world_size_run_by_the_harness(tmp_path,
                                                                               monkeypatch):
    module = _module('''
        import os
        from torch.testing._internal.common_distributed import MultiProcessTestCase

        class Child(MultiProcessTestCase):
            world_size = 3
            set_ups = 0  # class state the harness's parent changes, in the process it runs in

            def setUp(self):
                super().setUp()
                type(self).set_ups += 1
                self._spawn_processes()

            def test_one(self):
                SEEN.append((self._testMethodName, self.rank, self.file_name,
                             os.path.exists(self.file_name), os.getpid()))

            def helper(self):
                raise AssertionError("not a test")
    ''', name="suite_run_by_the_harness")
    module.SEEN = []
    cases, problems = _suites.definitions(module)
    assert problems == []
    assert [(c.name, c.world_sizes) for c in cases] == [("Child.test_one", [3])]
    assert cases[0].source == "suite_run_by_the_harness.py:14"
    # Each rank runs torch's own child entry (MultiProcessTestCase._run): its instance of the
    # method, with its rank and the file the parent side's setUp made; that set-up runs in rank
    # 0's helper, another process (tests/python/test_harness_parent.py has the details). What
    # torch's child entry changes in its process for good is undone with the test.
    monkeypatch.delenv("TORCH_SHOW_CPP_STACKTRACES", raising=False)
    monkeypatch.setattr(torch._C, "_set_print_stack_traces_on_fatal_signal", lambda on: None)
    monkeypatch.setitem(sys.modules, module.__name__, module)  # where the helper finds it
    _harness_parent.start()
    try:
        assert _ranks_run(cases[0], 3, tmp_path) == [None, None, None]
    finally:
        _harness_parent.stop()
    seen = sorted(module.SEEN, key=lambda ran: ran[1])
    assert [(name, rank, exists, pid) for name, rank, _, exists, pid in seen] == \
        [("test_one", r, True, os.getpid()) for r in range(3)]
    assert len({file_name for _, _, file_name, _, _ in seen}) == 1  # one set-up for the world
    assert module.Child.set_ups == 0  # the set-up ran in the helper, not in the rank


def test_a_skipped_class_skips_and_a_broken_world_size_is_named():
    module = _module('''
        import unittest
        from torch.testing._internal.common_distributed import MultiProcessTestCase

        @unittest.skip("not on this platform")
        class Skipped(MultiProcessTestCase):
            def test_a(self):
                raise AssertionError("must not run")

        class Broken(MultiProcessTestCase):
            @property
            def world_size(self):
                raise RuntimeError("no devices")

            def test_b(self):
                pass

        class MethodSkipped(MultiProcessTestCase):
            @unittest.skip("needs MPI")
            def test_c(self):
                raise AssertionError("must not run")
    ''')
    cases, problems = _suites.definitions(module)
    assert [c.name for c in cases] == ["Skipped.test_a", "MethodSkipped.test_c"]
    for case, why in zip(cases, ["not on this platform", "needs MPI"]):
        with pytest.raises(unittest.SkipTest, match=why):
            case.body(_Ctx(0))  # before any set-up, as unittest: no helper is asked
    assert len(problems) == 1 and "Broken.test_b: cannot read its world_size" in problems[0]
    assert "RuntimeError: no devices" in problems[0]


def test_only_the_files_own_harness_classes_are_cases():
    module = _module('''
        import unittest
        from torch.testing._internal.common_distributed import MultiProcessTestCase

        class Plain(unittest.TestCase):  # no harness: pytest's, not cprr's
            def test_x(self):
                pass
    ''')
    module.Imported = type("Imported", (MultiProcessTestCase,), {"test_y": lambda self: None,
                                                                "__module__": "elsewhere"})
    module.MultiProcessTestCase = MultiProcessTestCase
    assert _suites.definitions(module) == ([], [])


def test_a_continuous_class_is_set_up_once_per_rank_process_and_its_skip_holds():
    import continuous_stand_in  # noqa: F401  (adds MultiProcContinuousTest where torch lacks it)

    module = _module('''
        import sys
        from torch.testing._internal.common_distributed import (
            MultiProcContinuousTest, TEST_SKIPS)

        class Kept(MultiProcContinuousTest):
            world_size = 2
            inits = []

            @classmethod
            def _init_pg(cls, rank, world_size, rdvz_file):
                cls.inits.append((rank, world_size, rdvz_file))

            def test_one(self):
                RAN.append((type(self).rank, self.rank, self.world_size))

        class NeedsGpus(MultiProcContinuousTest):
            world_size = 2
            inits = []

            @classmethod
            def _init_pg(cls, rank, world_size, rdvz_file):
                cls.inits.append(rank)
                sys.exit(TEST_SKIPS["multi-gpu-2"].exit_code)

            def test_two(self):
                raise AssertionError("must not run")
    ''')
    module.RAN = []
    cases, problems = _suites.definitions(module)
    assert problems == [] and [c.name for c in cases] == ["Kept.test_one", "NeedsGpus.test_two"]
    kept, needs_gpus = cases
    kept.body(_Ctx(1))
    kept.body(_Ctx(1))
    assert module.Kept.inits == [(1, 2, "/shared/rendezvous_file.7")]  # once for this process
    assert module.RAN == [(1, 1, 2), (1, 1, 2)]
    for _ in range(2):
        with pytest.raises(unittest.SkipTest, match="Need at least 2 CUDA devices"):
            needs_gpus.body(_Ctx(0))
    assert module.NeedsGpus.inits == [0]  # the skip is remembered, as the harness's worker does


def test_a_continuous_class_runs_its_own_worker_loop_with_its_set_up_kept():
    # An override of _worker_loop (a device's set-up before the harness's loop, as vendors'
    # subclasses do) runs for every case; the set-up inside it (_init_pg) once per rank process;
    # a failing test's own exception is the case's error, not the loop's wrapper.
    import continuous_stand_in  # noqa: F401

    module = _module('''
        from torch.testing._internal.common_distributed import MultiProcContinuousTest

        class Vendor(MultiProcContinuousTest):
            world_size = 2
            loops, inits = [], []
            prepared = None

            @classmethod
            def _worker_loop(cls, rank, world_size, rdvz_file, task_queue, completion_queue):
                cls.loops.append(rank)
                cls.prepared = f"device of rank {rank}"
                super()._worker_loop(rank, world_size, rdvz_file, task_queue, completion_queue)

            @classmethod
            def _init_pg(cls, rank, world_size, rdvz_file):
                cls.inits.append(rank)

            def test_sees_the_loop(self):
                RAN.append((type(self).prepared, self.rank))

            def test_fails(self):
                raise KeyError("the test's own error")
    ''')
    module.RAN = []
    cases, problems = _suites.definitions(module)
    assert problems == []
    by_name = {c.name: c for c in cases}
    sees, fails = by_name["Vendor.test_sees_the_loop"], by_name["Vendor.test_fails"]
    own_init_pg = vars(module.Vendor)["_init_pg"]
    sees.body(_Ctx(1))
    with pytest.raises(KeyError, match="the test's own error"):
        fails.body(_Ctx(1))
    sees.body(_Ctx(1))
    assert module.Vendor.loops == [1, 1, 1]  # the class's own loop, for each case
    assert module.Vendor.inits == [1]  # its set-up once for this rank process
    assert module.RAN == [("device of rank 1", 1), ("device of rank 1", 1)]
    assert vars(module.Vendor)["_init_pg"] is own_init_pg  # the class's own, back after each case


def test_a_worker_loop_that_answers_nothing_is_named():
    import continuous_stand_in  # noqa: F401

    module = _module('''
        from torch.testing._internal.common_distributed import MultiProcContinuousTest

        class Silent(MultiProcContinuousTest):
            world_size = 2

            @classmethod
            def _worker_loop(cls, rank, world_size, rdvz_file, task_queue, completion_queue):
                pass  # never reads its task queue

            def test_x(self):
                pass
    ''')
    (case,), _ = _suites.definitions(module)
    with pytest.raises(RuntimeError, match="_worker_loop returned without answering for "
                                           "suite_under_test.Silent.test_x"):
        case.body(_Ctx(0))

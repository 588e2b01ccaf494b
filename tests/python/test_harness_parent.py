"""The harness's parent side run once per execution (cprr.suites.harness_parent, its helper
process cprr.suites.harness_helper) and its join (cprr.suites.harness_join), in process.

What the helper does for a set-up (processes recorded, not started; the environment's changes;
skips, errors and the exit checks), that it runs in another process than the rank (the class
state its setUp changes stays there), that tearDown runs once every rank is done and its failure
is the test's, and how a rank runs the child entry and judges its exit as the harness's parent
does.
"""

import multiprocessing
import os
import sys
import textwrap
import threading
import types
import unittest

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "stand_ins"))  # torch 1.13's harness imports expecttest

from torch.testing._internal import common_distributed  # noqa: E402
from torch.testing._internal.common_distributed import TEST_SKIPS  # noqa: E402

from cprr.distributed import shim as _shim
from cprr.suites import harness_helper as _harness_helper  # noqa: E402
from cprr.suites import harness_join as _harness_join  # noqa: E402
from cprr.suites import harness_parent as _harness_parent  # noqa: E402
from cprr.suites import testcase as _suites


def _module(name, source):
    """A test file's module, importable by name (the helper finds its classes in sys.modules)."""
    module = types.ModuleType(name)
    exec(compile(textwrap.dedent(source), f"{name}.py", "exec"), module.__dict__)
    sys.modules[name] = module
    return module


SUITE = '''
    import os
    import sys
    import tempfile
    import unittest
    from torch.testing._internal.common_distributed import MultiProcessTestCase, TEST_SKIPS

    EVENTS = []  # what the parent side did, in the process that did it


    class Suite(MultiProcessTestCase):
        set_ups = 0  # class state the parent's setUp changes (as torch's file Barrier's)

        @classmethod
        def setUpClass(cls):
            super().setUpClass()
            EVENTS.append(("setUpClass", os.getpid()))
            os.environ["SUITE_MASTER"] = "127.0.0.1"

        def setUp(self):
            super().setUp()
            type(self).set_ups += 1
            self.folder = tempfile.mkdtemp()
            os.environ["SUITE_DIR"] = self.folder
            EVENTS.append(("setUp", self._testMethodName, os.getpid()))
            if self._testMethodName == "test_skipped_in_set_up":
                raise unittest.SkipTest("no such device here")
            if self._testMethodName == "test_set_up_fails":
                raise RuntimeError("the set-up broke")
            if self._testMethodName == "test_exits_oddly":  # the harness's wrapper keeps it
                self.skip_return_code_checks = [self.test_exits_oddly.__wrapped__]
            self._spawn_processes()

        def tearDown(self):
            os.rmdir(self.folder)
            super().tearDown()
            if self._testMethodName == "test_tear_down_fails":
                raise RuntimeError("the tear-down broke")

        @property
        def world_size(self):
            return 2

        @classmethod
        def _run(cls, rank, test_name, file_name, pipe, **kwargs):
            RAN.append((rank, test_name, os.path.exists(file_name), os.environ.get("SUITE_DIR"),
                        os.environ.get("SUITE_MASTER"), kwargs))
            if test_name == "test_fails":
                pipe.send("Traceback: AssertionError: 1 != 2\\n")
                sys.exit(cls.TEST_ERROR_EXIT_CODE)
            if test_name == "test_skips":
                sys.exit(TEST_SKIPS["multi-gpu-2"].exit_code)
            if test_name in ("test_exits_oddly", "test_exits_oddly_checked"):
                sys.exit(3)
            if test_name == "test_rank_1_exits_oddly" and rank == 1:
                sys.exit(3)
            sys.exit(0)

        def test_passes(self):
            pass

        test_fails = test_skips = test_exits_oddly = test_exits_oddly_checked = test_passes
        test_skipped_in_set_up = test_set_up_fails = test_tear_down_fails = test_passes
        test_rank_1_exits_oddly = test_passes


    class JudgedByRank0(Suite):
        """torch 2.x's judgement of the exit codes: the error codes and timeouts, then rank 0's
        code alone (the others' are not compared with it, as torch 1.x does)."""

        def _check_return_codes(self, fn, elapsed_time):
            first = self.processes[0]
            if any(p.exitcode == self.TEST_ERROR_EXIT_CODE for p in self.processes):
                raise RuntimeError("a process exited with the error code")
            if any(p.exitcode is None for p in self.processes):
                raise RuntimeError("a process timed out")
            for skip in TEST_SKIPS.values():
                if first.exitcode == skip.exit_code:
                    raise unittest.SkipTest(skip.message)
            self.assertEqual(first.exitcode, 0)
'''


class _Ctx:
    def __init__(self, folder, rank, execution, world_size=2):
        self.rank, self.world_size = rank, world_size
        self._folder, self._execution = folder, execution

    def shared_path(self, name):
        return os.path.join(self._folder, f"{name}.{self._execution}")


@pytest.fixture
def suite():
    module = _module("harness_parent_suite", SUITE)
    module.RAN = []
    _harness_parent.start()
    yield module
    _harness_parent.stop()
    del sys.modules["harness_parent_suite"]


def _run(module, folder, test, execution, ranks=(0, 1), cls="Suite"):
    """`ranks` of one execution of `cls`.`test`, each on a thread of its own, as ranks run side by
    side (a rank whose exit the harness judges by every rank's waits for the others); what each
    raised, or None."""
    cases = {c.name: c for c in _suites.definitions(module)[0]}
    raised = {}

    def rank_body(rank):
        try:
            cases[f"{cls}.{test}"].body(_Ctx(folder, rank, execution))
            raised[rank] = None
        except BaseException as e:  # noqa: B902  the case body's failures are what we check
            raised[rank] = e

    threads = [threading.Thread(target=rank_body, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), f"{cls}.{test}: a rank did not finish"
    return [raised[r] for r in ranks]


def test_ranks_run_the_child_entry_the_parents_set_up_started(suite, tmp_path):
    assert _run(suite, tmp_path, "test_passes", 1) == [None, None]
    assert len(suite.RAN) == 2
    for rank, (ran_rank, name, file_exists, folder, master, kwargs) in enumerate(sorted(
            suite.RAN, key=lambda ran: ran[0])):  # the ranks ran side by side
        assert (ran_rank, name, file_exists, master, kwargs) == \
            (rank, "test_passes", True, "127.0.0.1", {})
        assert folder and folder.startswith("/")
    assert suite.RAN[0][3] == suite.RAN[1][3]  # one parent: one folder for both ranks
    # The parent side ran elsewhere: this process's class state and environment are untouched.
    assert suite.Suite.set_ups == 0 and suite.EVENTS == []
    assert "SUITE_DIR" not in os.environ and "SUITE_MASTER" not in os.environ


def test_tear_down_runs_once_every_rank_is_done(suite, tmp_path):
    assert _run(suite, tmp_path, "test_passes", 1, ranks=(0,)) == [None]
    first = suite.RAN[0][3]
    assert os.path.isdir(first)  # rank 1 has not run its child entry yet: no tearDown
    assert _run(suite, tmp_path, "test_passes", 1, ranks=(1,)) == [None]
    assert not os.path.exists(first)  # torn down as the last rank finished, as after the join
    # A tearDown rank 0 never asked for (its other rank never finished) runs before the next
    # set-up.
    assert _run(suite, tmp_path, "test_passes", 2, ranks=(0,)) == [None]
    second = suite.RAN[2][3]
    assert os.path.isdir(second)
    assert _run(suite, tmp_path, "test_passes", 3) == [None, None]
    assert not os.path.exists(second)


def test_a_tear_down_that_fails_is_the_tests_error(suite, tmp_path):
    raised = _run(suite, tmp_path, "test_tear_down_fails", 1)
    # The rank that finished last (either: they ran side by side) waited for the tearDown and
    # reports it; one that finished first had returned.
    reported = [e for e in raised if e is not None]
    assert reported and all(isinstance(e, _harness_join.HarnessTearDownError) for e in reported), \
        raised
    assert "RuntimeError: the tear-down broke" in str(reported[0])
    # A failed test keeps its own failure; the next test is unharmed.
    failed = _run(suite, tmp_path, "test_fails", 2)
    assert all(isinstance(e, _harness_join.ChildFailure) for e in failed)
    assert _run(suite, tmp_path, "test_passes", 3) == [None, None]


def test_the_parent_runs_in_the_users_environment(suite, tmp_path, monkeypatch):
    monkeypatch.setitem(os.environ, "RANK", "1")  # a rank's variable, not the user's
    monkeypatch.setattr(_shim, "USER_ENVIRONMENT",
                        {k: v for k, v in os.environ.items() if k != "RANK"})
    _harness_parent.stop()
    _harness_parent.start()
    spawn = _harness_parent.spawned(_Ctx(tmp_path, 0, 1), suite.Suite, "test_passes")
    assert "RANK" not in spawn.env  # the user has none, and the helper's is the user's


def test_a_failure_is_the_childs_traceback_and_a_skip_code_skips(suite, tmp_path):
    failed = _run(suite, tmp_path, "test_fails", 1)
    assert all(isinstance(e, _harness_join.ChildFailure) for e in failed)
    assert "AssertionError: 1 != 2" in str(failed[0])
    skipped = _run(suite, tmp_path, "test_skips", 2)
    assert all(isinstance(e, unittest.SkipTest) for e in skipped)
    assert str(skipped[0]) == TEST_SKIPS["multi-gpu-2"].message


def test_exit_codes_are_judged_as_the_parent_judges_them(suite, tmp_path):
    odd = _run(suite, tmp_path, "test_exits_oddly_checked", 1)
    assert all(isinstance(e, _harness_join.ChildFailure) for e in odd)
    assert "exited with status 3; the harness expects 0" in str(odd[0])
    # In skip_return_code_checks: only the error code would fail it.
    assert _run(suite, tmp_path, "test_exits_oddly", 2) == [None, None]


def test_ranks_that_exit_differently_are_judged_by_the_classs_own_check(suite, tmp_path):
    # torch 1.13's _check_return_codes: every rank's code must be rank 0's.
    raised = _run(suite, tmp_path, "test_rank_1_exits_oddly", 1)
    assert raised[0] is None
    assert isinstance(raised[1], _harness_join.ChildFailure), raised
    assert "exited with status 3; the harness expects 0" in str(raised[1])
    assert "match Process 0 exit code" in str(raised[1])
    # torch 2.x's (here an override of it): rank 0's code decides, the others' are not compared.
    assert _run(suite, tmp_path, "test_rank_1_exits_oddly", 2, cls="JudgedByRank0") == \
        [None, None]


def test_a_set_up_skip_or_error_reaches_every_rank_and_no_child_runs(suite, tmp_path):
    skipped = _run(suite, tmp_path, "test_skipped_in_set_up", 1)
    assert [str(e) for e in skipped] == ["no such device here"] * 2
    failed = _run(suite, tmp_path, "test_set_up_fails", 2)
    assert all(isinstance(e, _harness_parent.HarnessSetUpError) for e in failed)
    assert "RuntimeError: the set-up broke" in str(failed[1])
    assert suite.RAN == []


def test_a_world_of_another_size_than_the_set_up_started_is_named(suite, tmp_path):
    spawn = _harness_parent.spawned(_Ctx(tmp_path, 0, 1), suite.Suite, "test_passes")
    with pytest.raises(_harness_parent.HarnessSetUpError, match="started 2 process"):
        _harness_parent.run_child(spawn, suite.Suite, 0, 4)


def test_recording_keeps_target_arguments_and_a_pipe_for_the_rank():
    calls = []
    parent_end, child_end = multiprocessing.Pipe()
    with _harness_helper._Recording(calls):
        p = multiprocessing.get_context("spawn").Process(
            target=print, args=(0, "test_x", "/tmp/f", child_end), kwargs={"fake_pg": False})
        p.start()
        assert p.exitcode is None
        p.terminate()  # tearDown terminates its processes: nothing to do
    assert calls == [(print, (0, "test_x", "/tmp/f", child_end), {"fake_pg": False})]
    mine, theirs = multiprocessing.Pipe()
    spawn = _harness_parent.Spawn(_harness_helper.answer("ok", env={"A": "1", "B": None},
                                                          calls=calls, checks=(False, 0)))
    assert (spawn.status, spawn.env, spawn.count) == ("ok", {"A": "1", "B": None}, 1)
    assert spawn.call(0, theirs) == (print, (0, "test_x", "/tmp/f", theirs), {"fake_pg": False})


def test_the_parents_environment_holds_for_the_child_and_is_undone(monkeypatch):
    monkeypatch.setitem(os.environ, "KEPT", "mine")
    monkeypatch.delenv("ADDED", raising=False)
    with _harness_parent._Environment({"KEPT": "parent's", "ADDED": "1"}):
        assert (os.environ["KEPT"], os.environ["ADDED"]) == ("parent's", "1")
        os.environ["ADDED"] = "changed by the child"  # the child's own change stays
    assert os.environ["KEPT"] == "mine"
    assert os.environ.pop("ADDED") == "changed by the child"


def test_a_world_size_is_read_in_the_users_environment(monkeypatch):
    module = _module("world_size_suite", '''
        import os
        from torch.testing._internal.common_distributed import MultiProcessTestCase

        class FromEnvironment(MultiProcessTestCase):
            @property
            def world_size(self):
                return int(os.environ["WORLD_SIZE"])

            def test_a(self):
                pass

            def test_b(self):
                pass
    ''')
    monkeypatch.setitem(os.environ, "WORLD_SIZE", "1")  # the rank's
    monkeypatch.setattr(_shim, "USER_ENVIRONMENT", {**os.environ, "WORLD_SIZE": "3"})
    # The harness's deadline is common_distributed's get_timeout of the test's id: torch's
    # default (TIMEOUT_DEFAULT, from DISTRIBUTED_TESTS_DEFAULT_TIMEOUT), or the test's entry in
    # TIMEOUT_OVERRIDE. Both asked of torch, an override set here for test_b.
    default = float(common_distributed.TIMEOUT_DEFAULT)
    monkeypatch.setitem(common_distributed.TIMEOUT_OVERRIDE, "test_b", default + 17)
    cases, problems = _suites.definitions(module)
    assert problems == [] and [c.world_sizes for c in cases] == [[3], [3]]
    timeouts = {c.name: c.timeout_s for c in cases}
    assert default > 0  # not cprr's own default (0.0): the checks below can tell them apart
    assert timeouts == {"FromEnvironment.test_a": default, "FromEnvironment.test_b": default + 17}
    assert os.environ["WORLD_SIZE"] == "1"
    del sys.modules["world_size_suite"]


def test_a_module_imported_after_the_fork_is_imported_by_the_helper(tmp_path):
    """A file rank 0 imports after its helper was forked (one left to the rank, pytest's
    collection) is imported by the helper from its file, under the same module name."""
    path = tmp_path / "late_suite.py"
    path.write_text(textwrap.dedent(SUITE))
    _harness_parent.start()
    try:
        sys.path.insert(0, str(tmp_path))
        import late_suite

        late_suite.RAN = []
        spawn = _harness_parent.spawned(_Ctx(tmp_path, 0, 1), late_suite.Suite, "test_passes")
        assert spawn.status == "ok", spawn.text
        assert _harness_parent.run_child(spawn, late_suite.Suite, 0, 2) == (0, [])
        assert late_suite.RAN[0][:3] == (0, "test_passes", True)
    finally:
        _harness_parent.stop()
        sys.path.remove(str(tmp_path))
        sys.modules.pop("late_suite", None)


def test_a_rank_0_without_its_helper_fails_every_rank_at_once(tmp_path):
    module = _module("no_helper_suite", SUITE)
    module.RAN = []
    failed = _run(module, tmp_path, "test_passes", 1)  # no helper started in this process
    assert all(isinstance(e, _harness_parent.HarnessSetUpError) for e in failed)
    assert "rank 0 has no process for the harness's setUp" in str(failed[1])
    del sys.modules["no_helper_suite"]

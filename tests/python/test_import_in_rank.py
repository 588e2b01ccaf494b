"""Case files a template leaves to its ranks (cprr.rank.import_probe): a file that reads a rank's
variables at import (Megatron's Utils) or starts a thread is imported by each forked rank with
that rank's torchrun variables, while the other files stay imported once in the template; a
pytest collection that reads them is done by each rank. A file of TestCase-family tests only is
imported in the template with the user's variables (its harness's processes all read those).
Through cprecord on cpu, pooled and fresh, at two world sizes; in-process, what the probe says of
a file."""

import json
import os
import textwrap

from cprr.rank import import_probe as _import_probe
from cprr.suites import case_files as _case_files
from conftest import record_python, run_tool

READER = textwrap.dedent('''
    import os
    import cprr

    IMPORTED_BY = os.getpid()


    class Utils:  # as Megatron's tests/unit_tests/test_utilities.py: read in the class body
        world_size = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ["LOCAL_RANK"])


    @cprr.case(name="reader/sees_its_rank", world_sizes=[2, 3])
    def sees_its_rank(ctx):
        assert (Utils.rank, Utils.world_size) == (ctx.rank, ctx.world_size)
        assert IMPORTED_BY == os.getpid()  # this rank imported the file
''')

PLAIN = textwrap.dedent('''
    import os
    import cprr

    IMPORTED_BY = os.getpid()


    @cprr.case(name="plain/imported_once", world_sizes=[2])
    def imported_once(ctx):
        assert IMPORTED_BY != os.getpid()  # the template imported it, before the fork
''')

THREAD = textwrap.dedent('''
    import threading
    import time
    import cprr

    threading.Thread(target=time.sleep, args=(3600,),  # why: a thread the import leaves running
                     daemon=True, name="prefetcher").start()


    @cprr.case(name="thread/at_import", world_sizes=[2])
    def at_import(ctx):
        assert any(t.name == "prefetcher" for t in threading.enumerate())
''')


# A suite whose import reads WORLD_SIZE, as torch's DistributedTest's decorators do: its harness
# imports it in the parent and in each child, all with the user's environment.
SUITE_READER = textwrap.dedent('''
    import os
    from torch.testing._internal.common_distributed import MultiProcessTestCase

    IMPORTED_BY = os.getpid()
    WORLD = int(os.environ["WORLD_SIZE"])


    class Suite(MultiProcessTestCase):
        @property
        def world_size(self):
            return WORLD

        def setUp(self):
            super().setUp()
            self._spawn_processes()

        def test_sees_the_users_world_size(self):
            assert WORLD == 2 and os.environ["WORLD_SIZE"] == "2"
            assert IMPORTED_BY != os.getpid()  # the template imported it, before the fork
''')

STAND_INS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stand_ins")


def test_files_that_must_be_imported_in_the_rank_are(tmp_path):
    for name, text in (("test_reader.py", READER), ("test_plain.py", PLAIN),
                       ("test_thread.py", THREAD)):
        (tmp_path / name).write_text(text)
    run = record_python(tmp_path, "--mode", "both", "--db", tmp_path / "a.db", "--json")
    cases = {c["label"]: c for c in json.loads(run.stdout)["cases"]}
    assert sorted(cases) == ["plain/imported_once@2", "reader/sees_its_rank@2",
                             "reader/sees_its_rank@3", "thread/at_import@2"], run.stderr
    for case in cases.values():
        assert case["as_expected"] and case["status"] == "pass", case
    assert run.returncode == 0


def test_a_suite_that_reads_the_users_world_size_is_imported_once(tmp_path):
    (tmp_path / "test_suite_reader.py").write_text(SUITE_READER)
    run = record_python(tmp_path, "--mode", "both", "--db", tmp_path / "s.db", "--json",
                        pythonpath=[STAND_INS], env={"WORLD_SIZE": "2"})
    (case,) = json.loads(run.stdout)["cases"]
    assert case["label"] == "Suite.test_sees_the_users_world_size@2", case
    assert case["status"] == "pass" and not case["fresh_vs_pool"], run.stderr[-3000:]
    assert "imported by each rank" not in run.stderr, run.stderr[-3000:]


def test_a_pytest_collection_that_reads_a_rank_is_done_by_each_rank(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "import os\nRANK, WORLD = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])\n")
    (tmp_path / "test_env.py").write_text(textwrap.dedent('''
        import pytest
        import torch.distributed as dist
        from conftest import RANK, WORLD

        @pytest.mark.world_size(3)
        def test_env():
            assert (RANK, WORLD) == (dist.get_rank(), dist.get_world_size())
    '''))
    run = run_tool("--backend", "cpu", "--pytest", tmp_path, "--mode", "both", "--db",
                   tmp_path / "b.db", "--json", cwd=tmp_path)
    (case,) = json.loads(run.stdout)["cases"]
    assert case["label"] == "test_env.py::test_env@3" and case["status"] == "pass", case
    assert not case["fresh_vs_pool"], case


def test_the_probe_says_what_an_import_does(tmp_path, monkeypatch):
    files = {"reads.py": "import os\nR = os.environ.get('LOCAL_RANK')\nW = os.getenv('WORLD_SIZE')\n",
             "plain.py": "import os\nHOME = os.environ.get('HOME')\n",
             "broken.py": "raise ImportError('not here')\n",
             # The suite alone is its harness's: the user's variables. With a case of cprr's
             # beside it, the rank's.
             "suite_reads.py": SUITE_READER,
             "mixed.py": SUITE_READER + "\nimport cprr\n\n\n@cprr.case(name='mixed/case')\n"
                         "def mixed(ctx):\n    pass\n",
             "threads.py": "import threading, time\n"
                           "threading.Thread(target=time.sleep,"  # why: the import's poller thread
                           " args=(60,), daemon=True, name='poller').start()\n"}
    said = {}
    monkeypatch.setenv("WORLD_SIZE", "2")  # the user's, as SUITE_READER's harness needs
    monkeypatch.syspath_prepend(STAND_INS)  # torch 1.13's harness imports expecttest
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        said[name] = _import_probe.why_in_rank(_case_files.import_target, str(tmp_path / name))
    # torch's harness reads more of them as it is imported (common_distributed's env://).
    mixed = said.pop("mixed.py")
    assert mixed.startswith("reads ") and "WORLD_SIZE" in mixed, mixed
    assert said == {"reads.py": "reads LOCAL_RANK, WORLD_SIZE", "plain.py": None,
                    "broken.py": None, "threads.py": "starts thread(s) poller",
                    "suite_reads.py": None}

"""Case files a template leaves to its ranks (cprr.rank.import_probe): a file that reads a rank's
variables at import (Megatron's Utils) or starts a thread is imported by each forked rank with
that rank's torchrun variables, while the other files stay imported once in the template; a
pytest collection that reads them is done by each rank. Through cprecord on cpu, pooled and fresh,
at two world sizes; in-process, what the probe says of a file."""

import json
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

    threading.Thread(target=time.sleep, args=(3600,), daemon=True, name="prefetcher").start()


    @cprr.case(name="thread/at_import", world_sizes=[2])
    def at_import(ctx):
        assert any(t.name == "prefetcher" for t in threading.enumerate())
''')


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


def test_the_probe_says_what_an_import_does(tmp_path):
    files = {"reads.py": "import os\nR = os.environ.get('LOCAL_RANK')\nW = os.getenv('WORLD_SIZE')\n",
             "plain.py": "import os\nHOME = os.environ.get('HOME')\n",
             "broken.py": "raise ImportError('not here')\n",
             "threads.py": "import threading, time\n"
                           "threading.Thread(target=time.sleep, args=(60,), daemon=True,"
                           " name='poller').start()\n"}
    said = {}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        said[name] = _import_probe.why_in_rank(_case_files.import_target, str(tmp_path / name))
    assert said == {"reads.py": "reads LOCAL_RANK, WORLD_SIZE", "plain.py": None,
                    "broken.py": None, "threads.py": "starts thread(s) poller"}

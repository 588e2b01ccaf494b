"""torchrun scripts as cprr cases, unchanged (cprr.suites.scripts): ``cprr.script`` in a case file
over a grid of command lines, and ``cprecord --torchrun SCRIPT -- ARGS`` / ``--torchrun-module``.

End to end on corpus/suites/torchrun/test_scripts.py (seed 001's config rewrite in a sibling module:
a state leak pooled, named by cpreplay with its polluter; its twin clean) and on scripts written
here: what a rank gives the script (argv, sys.path[0], __main__, torchrun's environment, its
init_process_group), exit statuses, a script's prints beside the control channel, skips and
usage errors; the pytest plugin's items for the declarations. In-process: run() restores argv
and sys.path and keeps imported modules.
"""

import json
import os
import sys
import textwrap

import pytest

from cprr.suites import scripts as _scripts
from conftest import record_python, run_pytest, run_tool

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "corpus", "suites", "torchrun")
VICTIM = "cp_attention{argv=--format bshd --config cp_1_0}@2"
POLLUTER = "cp_attention{argv=--format thd --config cp_1_0}@2"


def cprecord(*args, cwd=None):
    return run_tool("--backend", "cpu", *args, cwd=cwd)


def test_a_grid_of_command_lines_and_seed_001s_leak(tmp_path):
    db = tmp_path / "scripts.db"
    run = record_python(os.path.join(SCRIPTS, "test_scripts.py"), "--mode", "both", "--db", db,
                        "--json")
    cases = {c["label"]: c for c in json.loads(run.stdout)["cases"]}
    assert sorted(cases) == sorted([
        VICTIM, POLLUTER,
        "cp_attention_fixed{argv=--format thd --config cp_2_0 --copy-config}@2",
        "cp_attention_fixed{argv=--format bshd --config cp_2_0 --copy-config}@2"]), run.stderr
    assert cases[VICTIM]["fresh_vs_pool"], cases[VICTIM]
    pooled = next(e for e in cases[VICTIM]["executions"] if e["mode"] == "pool")
    assert "--format bshd --config cp_1_0 exited with status 1 at run_context_parallel.py:" \
        in pooled["summary"], pooled
    for label, case in cases.items():
        if label != VICTIM:
            assert case["as_expected"] and not case["fresh_vs_pool"], case
    replay = run_tool("--db", db, "--case", cases[VICTIM]["id"], tool="cpreplay")
    assert replay.stdout.splitlines()[0].endswith(f"{VICTIM} (run 1): state_leak"), replay.stdout
    assert f"case {cases[POLLUTER]['id']} {POLLUTER}" in replay.stdout, replay.stdout


SCRIPT = textwrap.dedent('''
    import os
    import sys

    import torch
    import torch.distributed as dist

    import sibling  # beside the script: sys.path[0] is its folder

    assert __name__ == "__main__"
    assert sys.argv[0] == __file__ and os.path.dirname(__file__) == sys.path[0], sys.argv
    for _ in range(2000):  # a chatty script: its prints never reach cprr's control channel
        print("step", flush=False)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    assert (dist.get_rank(), dist.get_world_size()) == (rank, world)
    t = torch.ones(2) * (rank + 1)
    dist.all_reduce(t)
    want = float(sys.argv[sys.argv.index("--want") + 1]) if "--want" in sys.argv else None
    if want is not None and t[0].item() != want:
        sys.exit(f"sum {t[0].item()} != {want}")
    if "--skip" in sys.argv:
        import unittest
        raise unittest.SkipTest("needs 8 GPUs")
    sibling.RUNS.append(rank)
    sys.exit(0)
''')


@pytest.fixture
def script(tmp_path):
    (tmp_path / "sibling.py").write_text("RUNS = []\n")
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def test_torchrun_runs_one_script_at_each_world_size(script, tmp_path):
    run = cprecord("--torchrun", script, "--nproc-per-node", "2", "3", "--db",
                   tmp_path / "a.db", "--json", "--mode", "both", "--", "--want", "3")
    cases = {c["label"]: c for c in json.loads(run.stdout)["cases"]}
    assert sorted(cases) == ["train{argv=--want 3}@2", "train{argv=--want 3}@3"], run.stderr
    assert cases["train{argv=--want 3}@2"]["as_expected"], cases
    failed = cases["train{argv=--want 3}@3"]  # 1 + 2 + 3 = 6
    assert failed["status"] == "fail" and not failed["as_expected"], failed
    assert all("exited with status 'sum 6.0 != 3.0' at train.py:" in e["summary"]
               for e in failed["executions"]), failed
    assert run.returncode == 1


def test_a_module_runs_from_the_current_folder_and_a_skip_is_a_skip(script, tmp_path):
    run = cprecord("--torchrun-module", "train", "--db", tmp_path / "b.db", "--json", "--",
                   "--skip", cwd=script.parent)
    (case,) = json.loads(run.stdout)["cases"]
    assert case["label"] == "train{argv=--skip}@1" and case["status"] == "skip", case
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("args, message", [
    (["--", "--want", "1"], "the arguments after -- are a script's or pytest's: give --torchrun SCRIPT"),
    (["--torchrun", "missing.py"], "--torchrun missing.py: no such script"),
    (["--torchrun-module", "not a module"], "not a module name"),
    (["--torchrun", "x.py", "-m", "y"], "give one of them"),
])
def test_usage_errors_name_the_input(tmp_path, args, message):
    (tmp_path / "x.py").write_text("")
    run = cprecord(*args, "--db", tmp_path / "c.db", cwd=tmp_path)
    assert run.returncode == 2 and message in run.stderr, run.stderr


# ---- in-process -------------------------------------------------------------------------------


def test_run_restores_argv_and_path_and_keeps_imports(tmp_path):
    (tmp_path / "seen_by_script.py").write_text("SEEN = []\n")
    path = tmp_path / "tiny.py"
    path.write_text(textwrap.dedent('''
        import sys
        import seen_by_script
        seen_by_script.SEEN.append((__name__, list(sys.argv), sys.path[0]))
        if sys.argv[1] != "0":
            sys.exit(int(sys.argv[1]))
    '''))
    argv, sys_path = list(sys.argv), list(sys.path)
    _scripts.run(str(path), ["0"])
    with pytest.raises(_scripts.ScriptExit, match=r"tiny.py 3 exited with status 3 at tiny.py:6"):
        _scripts.run(str(path), ["3"])
    assert sys.argv == argv and sys.path == sys_path
    seen = sys.modules.pop("seen_by_script").SEEN  # imported once, kept between runs
    assert seen == [("__main__", [str(path), "0"], str(tmp_path)),
                    ("__main__", [str(path), "3"], str(tmp_path))]


def test_script_declarations_are_checked(tmp_path):
    with pytest.raises(ValueError, match="give a script path or module=, not both"):
        _scripts.add("a.py", module="b", source="here:1")
    with pytest.raises(ValueError, match="no script"):
        _scripts.add("absent.py", folder=str(tmp_path), source="here:2")
    (tmp_path / "s.py").write_text("")
    with pytest.raises(ValueError, match="argv is a list of argument lists"):
        _scripts.add("s.py", folder=str(tmp_path), argv=["--flat"], source="here:3")


def test_the_pytest_plugin_runs_declared_scripts(tmp_path):
    run = run_pytest(tmp_path, os.path.join(SCRIPTS, "test_scripts.py"))
    assert f"test_scripts.py::{VICTIM} FAILED" in run.stdout, run.stdout  # pooled, after thd
    assert f"test_scripts.py::{POLLUTER} PASSED" in run.stdout, run.stdout
    assert "1 failed, 3 passed" in run.stdout, run.stdout


def test_a_reported_exit_shows_no_cprr_frames_and_a_cprr_error_keeps_them(tmp_path):
    from cprr.rank import case_body as _case_body

    path = tmp_path / "quits.py"
    path.write_text("import sys\nsys.exit(4)\n")
    def from_cprr(e):  # as in a rank: the traceback starts in cprr's frames, not this test's
        return e.with_traceback(e.__traceback__.tb_next)

    with pytest.raises(_scripts.ScriptExit) as reported:
        _scripts.run(str(path), [])
    assert _case_body._users_frames(from_cprr(reported.value)) is None  # its message says where
    with pytest.raises(ValueError) as broken:
        _scripts.add("a.py", module="b", source="here:1")
    frames = _case_body._users_frames(from_cprr(broken.value))
    assert frames is not None and frames.tb_frame.f_code.co_filename.endswith("/cprr/suites/scripts.py")

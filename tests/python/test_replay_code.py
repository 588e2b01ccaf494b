"""cpreplay of a Python run after its case files changed: it says which file changed since the
record and goes on (or refuses with --strict); a case renamed or a folder removed since gets a
message about the case files, never advice about --worker."""

import shutil
import textwrap

import pytest

from conftest import run_tool

CASE = textwrap.dedent('''
    import torch
    import torch.distributed as dist

    import cprr


    @cprr.case(name="code/sums", world_sizes=[1])
    def sums(ctx):
        t = torch.ones(4)
        dist.all_reduce(t)
        ctx.output("t", t)
''')


@pytest.fixture
def recorded(tmp_path):
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "test_sums.py").write_text(CASE)
    db = tmp_path / "run.db"
    run = run_tool("--python", folder, "--backend", "cpu", "--db", db, stderr_into_stdout=True,
                   timeout=120)
    assert run.returncode == 0, run.stdout
    return folder, db


def _replay(db, *extra):
    return run_tool("--db", db, "--case", "1", "--mode", "fresh", *extra, tool="cpreplay",
                    stderr_into_stdout=True, timeout=120)


def test_an_unchanged_file_replays_without_a_word_about_it(recorded):
    _, db = recorded
    replay = _replay(db)
    assert replay.returncode == 0, replay.stdout
    assert "changed since" not in replay.stdout, replay.stdout


def test_a_changed_case_file_is_named_and_strict_refuses(recorded):
    folder, db = recorded
    path = folder / "test_sums.py"
    path.write_text(CASE + "\n# edited after the record\n")
    replay = _replay(db)
    assert replay.returncode == 0, replay.stdout
    said = f"case file {path} changed since run 1 was recorded (its content differs)"
    assert f"cpreplay: warning: {said}: the replay runs the code as it is now" in replay.stdout, \
        replay.stdout
    assert f"replayed other code: {said}" in replay.stdout, replay.stdout
    strict = _replay(db, "--strict")
    assert strict.returncode == 2, strict.stdout
    assert f"--strict: not replaying case 1: {said}" in strict.stdout, strict.stdout


def test_a_renamed_case_is_said_of_the_case_files_not_of_the_worker(recorded):
    folder, db = recorded
    (folder / "test_sums.py").write_text(CASE.replace("code/sums", "code/totals"))
    replay = _replay(db)
    assert replay.returncode == 2, replay.stdout
    assert (f"the case files of run 1 ({folder}) no longer define a case named code/sums: it was "
            "renamed or removed since the record") in replay.stdout, replay.stdout
    assert "--worker" not in replay.stdout, replay.stdout


def test_a_removed_folder_is_said_of_the_case_files(recorded):
    folder, db = recorded
    shutil.rmtree(folder)
    replay = _replay(db)
    assert replay.returncode == 2, replay.stdout
    assert f"case file {folder / 'test_sums.py'} (recorded in run 1) no longer exists" \
        in replay.stdout, replay.stdout
    assert f"cannot load the case files of run 1 ({folder})" in replay.stdout, replay.stdout
    assert "--worker" not in replay.stdout, replay.stdout

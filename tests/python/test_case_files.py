"""A run over case files that cannot all be loaded: a file that does not import, or two cases of
one name, fail the run at once (exit 2) naming the file and line or both definitions, and leave no
database behind; the rank process exits as soon as it said so (it used to wait forever at
interpreter exit, and cprecord 30 s for a frame). Files without a case say so."""

import shutil
import textwrap

import pytest

from conftest import run_tool

GOOD = textwrap.dedent('''
    import cprr


    @cprr.case(name="demo/good", world_sizes=[1])
    def good(ctx):
        pass
''')


@pytest.fixture
def cases(tmp_path):
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "test_good.py").write_text(GOOD)
    return folder


def _record(folder, db):
    # Well under the 30 s cprecord once waited for a catalog the rank never sent: a rank that
    # hangs at exit fails here instead of passing late.
    return run_tool("--python", folder, "--backend", "cpu", "--db", db, stderr_into_stdout=True,
                    timeout=20)


def test_a_file_that_does_not_import_fails_the_run_naming_it(cases, tmp_path):
    (cases / "test_broken.py").write_text("import cprr\n\ndef oops(:\n    pass\n")
    run = _record(cases, tmp_path / "run.db")
    assert run.returncode == 2, run.stdout
    assert f"cannot import {cases / 'test_broken.py'}" in run.stdout
    assert 'test_broken.py", line 3' in run.stdout and "SyntaxError" in run.stdout
    assert not (tmp_path / "run.db").exists(), "no database for a run that never started"


def test_two_cases_of_one_name_name_both_definitions(cases, tmp_path):
    shutil.copy(cases / "test_good.py", cases / "test_again.py")
    run = _record(cases, tmp_path / "run.db")
    assert run.returncode == 2, run.stdout
    assert ("case 'demo/good' is defined twice: at test_again.py:5 and at test_good.py:5"
            in run.stdout), run.stdout
    assert not (tmp_path / "run.db").exists()


def test_files_without_cases_say_so_and_not_that_a_filter_matched_nothing(cases, tmp_path):
    (cases / "test_good.py").write_text("import cprr\n")
    run = _record(cases, tmp_path / "run.db")
    assert run.returncode == 2, run.stdout
    assert f"--python {cases}: no case in these files (no @cprr.case" in run.stdout, run.stdout
    assert "--filter" not in run.stdout

"""The Python package's layout as a reader relies on it: its imports point down its rooms
(tools/layout/check_python_imports.py, which refuses a package with one pointing up), and every
module has tests: tests/python/test_<module>.py, or a test file whose docstring names the module
(cprr.<room>.<module>)."""

import ast
import os
import pathlib
import subprocess
import sys

SOURCE = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = SOURCE / "python" / "cprr"
CHECK = SOURCE / "tools" / "layout" / "check_python_imports.py"
HERE = pathlib.Path(__file__).resolve().parent


def _check(root):
    return subprocess.run([sys.executable, str(CHECK), str(root)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60)


def test_the_packages_imports_point_down():
    done = _check(SOURCE)
    assert done.returncode == 0, done.stdout


def test_an_import_pointing_up_is_refused_naming_it(tmp_path):
    for room, text in (("api", "from cprr.rank import case_body\n"), ("rank", ""),
                       ("capture", "def f():\n    from cprr.suites import scripts\n")):
        folder = tmp_path / "python" / "cprr" / room
        folder.mkdir(parents=True)
        (folder / "m.py").write_text(text)
    done = _check(tmp_path)
    assert done.returncode == 1, done.stdout
    assert "api/m.py:1 imports cprr.rank.case_body" in done.stdout, done.stdout
    assert "capture/m.py:2 imports cprr.suites.scripts" in done.stdout, done.stdout  # a lazy one


def _named_in_test_docstrings():
    named = set()
    for path in HERE.glob("test_*.py"):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        for word in doc.split():
            word = word.strip("`'(),.:;")
            if word.startswith("cprr."):
                named.add(word[:-2] if word.endswith("'s") else word)  # cprr.x.y's Name
    return named


def test_every_module_has_tests_of_its_name_or_named_in_a_test_file():
    named = _named_in_test_docstrings()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py":
            continue
        dotted = "cprr." + ".".join(rel.with_suffix("").parts)
        own_file = (HERE / f"test_{path.stem}.py").exists()
        if not own_file and not any(n == dotted or n.startswith(dotted + ".") for n in named):
            missing.append(dotted)
    assert not missing, (f"modules no test file is named after or names in its docstring: "
                         f"{', '.join(missing)}")

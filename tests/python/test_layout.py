"""The Python package's layout as a reader relies on it: its imports point down its rooms
(tools/layout/check_python_imports.py, which refuses a package with one pointing up), and every
module has tests: tests/python/test_<module>.py, or a test file whose docstring names the module
(cprr.<room>.<module>). Within a room no circle of imports (the same check), no module is
over 400 lines, and no file of commands/ (C++) over 500. And no test rests on time (tools/layout/check_test_timing.py): a sleep or a
wall-time comparison under tests/ says why on its line."""

import ast
import os
import pathlib
import subprocess
import sys

SOURCE = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = SOURCE / "python" / "cprr"
CHECK = SOURCE / "tools" / "layout" / "check_python_imports.py"
TIMING = SOURCE / "tools" / "layout" / "check_test_timing.py"
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


def test_a_circle_of_imports_inside_a_room_is_refused_naming_it(tmp_path):
    folder = tmp_path / "python" / "cprr" / "suites"
    folder.mkdir(parents=True)
    (folder / "a.py").write_text("from cprr.suites import b\n")
    (folder / "b.py").write_text("from cprr.suites.c import f\n")
    (folder / "c.py").write_text("def f():\n    from cprr.suites import a\n")  # a lazy one
    (folder / "d.py").write_text("from cprr.suites import a\n")  # into the circle, not of it
    done = _check(tmp_path)
    assert done.returncode == 1, done.stdout
    assert done.stdout.splitlines()[-1] == (
        "a circle of imports: suites.a -> suites.b -> suites.c -> suites.a"), done.stdout
    (folder / "c.py").write_text("def f():\n    pass\n")
    done = _check(tmp_path)
    assert done.returncode == 0, done.stdout


MAX_MODULE_LINES = 400  # a module past it holds more than one thing


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by role): {long}"


MAX_COMMAND_LINES = 500  # commands/ holds the verbs over the rooms: each file one job of a verb


def test_no_commands_file_is_over_500_lines():
    long = {p.name: n for p in sorted((SOURCE / "commands").glob("*.[ch]*"))
            if (n := len(p.read_text().splitlines())) > MAX_COMMAND_LINES}
    assert not long, f"commands/ files over {MAX_COMMAND_LINES} lines (split them by job): {long}"


def _timed(text):
    """`text` with its placeholders made the calls the check looks for: this file's own lines
    must not read as sleeps to the check that runs over it."""
    calls = {"SLEEP_FOR": "std::this_thread::" + "sleep_for", "USLEEP": "::" + "usleep",
             "TIME_SLEEP": "time." + "sleep", "WALL": "wall" + "_ms",
             "MONOTONIC": "time." + "monotonic()", "SHELL_SLEEP": "sle" + "ep",
             "MS": "m" + "s"}
    for key, call in calls.items():
        text = text.replace(key, call)
    return text


def test_a_sleep_or_a_wall_time_comparison_without_a_why_is_named(tmp_path):
    tests = tmp_path / "tests" / "x"
    tests.mkdir(parents=True)
    cpp = _timed("  SLEEP_FOR(50ms);\n"
                 "  SLEEP_FOR(5ms);  // why: the wait's poll\n"
                 "  EXPECT_LT(r.WALL, 3000);\n"
                 "  EXPECT_LT(r.ranks.size(), 3u);\n"
                 "  EXPECT_GE(r.WALL, 100);  // why: a floor\n"
                 "  USLEEP(100);  // the comment says no why\n"
                 "  EXPECT_TRUE(r.WALL < 3000) << r.summary;\n"
                 "  EXPECT_TRUE(done) << r.WALL;\n"
                 "  EXPECT_LT(best, 50MS);\n").splitlines()
    py = _timed("import time\n"
                "TIME_SLEEP(0.3)\n"
                "threading.Thread(target=TIME_SLEEP, args=(9,))  # why: a thread that must exist\n"
                "assert MONOTONIC - t0 < 5\n"
                "assert len(x) < 5\n").splitlines()
    (tests / "a_test.cpp").write_text("\n".join(cpp) + "\n")
    (tests / "test_b.py").write_text("\n".join(py) + "\n")
    sh = _timed("until [ -e f ]; do\n  SHELL_SLEEP 0.1\ndone\nSHELL_SLEEP 1  # why: a poll\n")
    (tests / "c.sh").write_text(sh)
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "slow.py").write_text(_timed("TIME_SLEEP(1)\n"))  # not a test
    done = subprocess.run([sys.executable, str(TIMING), str(tmp_path)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines() == (
        [f"tests/x/a_test.cpp:{n}: {cpp[n - 1].strip()}" for n in (1, 3, 6, 7, 9)]
        + ["tests/x/c.sh:2: " + sh.splitlines()[1].strip()]
        + [f"tests/x/test_b.py:{n}: {py[n - 1].strip()}" for n in (2, 4)]), done.stdout
    assert "8 line(s) rest on time" in done.stderr, done.stderr


def test_no_test_here_rests_on_time():
    done = subprocess.run([sys.executable, str(TIMING), str(SOURCE)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


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

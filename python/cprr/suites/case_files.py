"""The case files a rank imports (``--cases PATH``): files, directories of test files, modules.

Importing a file registers its ``@cprr.case`` functions (cprr.api.case); its classes of PyTorch's
multi-process TestCase family are registered after (cprr.suites.testcase). Imports neither torch nor
the compiled module: tools/device's scripts load cases with it from the source tree.
"""

import importlib
import importlib.util
import os
import sys
import traceback

from cprr.api import case as _case
from cprr.suites import testcase as _suites


def _is_test_file(name):
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _files_of(path):
    if os.path.isdir(path):
        found = []
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            found += [os.path.join(root, f) for f in sorted(files) if _is_test_file(f)]
        return found
    return [path]


def _import_file(path):
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)  # as pytest does: a test file imports its neighbours
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem in sys.modules:
        return sys.modules[stem]
    spec = importlib.util.spec_from_file_location(stem, path)
    if spec is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[stem] = module
    spec.loader.exec_module(module)
    return module


def import_target(target):
    """Imports one case file (a path) or module (a name) and registers its cases; returns the
    problems of its TestCase classes."""
    module = _import_file(target) if os.path.exists(target) else importlib.import_module(target)
    return _add_suite_cases(module)


def targets_of(items):
    """The files and modules `items` name: each file, each test file of a directory, each
    module."""
    return [t for item in items for t in (_files_of(item) if os.path.exists(item) else [item])]


def load_cases(items):
    """Imports every file, directory of test files or module in `items`; returns the problems
    (one text per item that failed to import)."""
    return load_leaving(items, lambda import_target, target: None)[0]


def load_leaving(items, leave_to_ranks):
    """load_cases for a template: ``leave_to_ranks(import_target, target)`` says why a target
    must be imported by each rank instead (cprr.rank.import_probe), or None. Returns the problems
    and the ``(target, why)`` pairs of the targets left, which are not imported here."""
    problems, left = [], []
    for target in targets_of(items):
        why = leave_to_ranks(import_target, target)
        if why:
            left.append((target, why))
            continue
        try:
            problems += import_target(target)
        except BaseException:  # a case file's SystemExit or syntax error is its problem
            problems.append(f"cannot import {target}:\n{traceback.format_exc()}")
    return problems, left


def _add_suite_cases(module):
    """Registers the cases of `module`'s TestCase-family classes, once per module (a file named
    twice, or a module imported again, is the same module); returns the problems."""
    if getattr(module, "__cprr_suites_added__", False):
        return []
    definitions, problems = _suites.definitions(module)
    for definition in definitions:
        try:
            _case.add(definition)
        except ValueError as e:
            problems.append(str(e))
    module.__cprr_suites_added__ = True
    return problems

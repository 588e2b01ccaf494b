"""Runs test ids of a unittest file under its own harness (unittest, in this process) and prints
each test's start and end as JSON lines, as they happen, so a reader that stops the run early
(compare_harness.py --deadline) keeps every test that ended:

    {"start": "Class.test"}
    {"test": "Class.test", "outcome": "pass" | "skip" | "fail", "seconds": S}

then, last, {"outcomes": {"Class.test": outcome, ...}, "seconds": S} for the whole run.

    python3 own_harness.py FILE Class.test_a Class.test_b ...

The file's folder is put first on sys.path and the file imported as its module, as
``python -m unittest`` would; a multi-process harness's children import it the same way."""

import importlib
import json
import os
import sys
import time
import unittest


def _say(record):
    # Straight to the reader: a run stopped at a deadline must leave every ended test behind.
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class _Outcomes(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}
        self._started = 0.0

    def _name(self, test):
        return ".".join(test.id().split(".")[-2:])

    def _ended(self, test, outcome):
        name = self._name(test)
        self.outcomes[name] = outcome
        _say({"test": name, "outcome": outcome, "seconds": time.monotonic() - self._started})

    def startTest(self, test):
        self._started = time.monotonic()
        _say({"start": self._name(test)})
        super().startTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._ended(test, "pass")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._ended(test, "skip")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._ended(test, "fail")

    def addError(self, test, err):
        super().addError(test, err)
        self._ended(test, "fail")


def main(argv):
    path, ids = argv[0], argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    module = importlib.import_module(os.path.splitext(os.path.basename(path))[0])
    suite = unittest.TestLoader().loadTestsFromNames(ids, module)
    start = time.monotonic()
    result = unittest.TextTestRunner(resultclass=_Outcomes, verbosity=2).run(suite)
    _say({"outcomes": result.outcomes, "seconds": time.monotonic() - start})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

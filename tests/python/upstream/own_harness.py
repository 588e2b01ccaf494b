"""Runs test ids of a unittest file under its own harness (unittest, in this process) and prints
each one's outcome as JSON: {"Class.test": "pass" | "skip" | "fail"}, then the seconds it took.

    python3 own_harness.py FILE Class.test_a Class.test_b ...

The file's folder is put first on sys.path and the file imported as its module, as
``python -m unittest`` would; a multi-process harness's children import it the same way."""

import importlib
import json
import os
import sys
import time
import unittest


class _Outcomes(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}

    def _name(self, test):
        return ".".join(test.id().split(".")[-2:])

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes[self._name(test)] = "pass"

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes[self._name(test)] = "skip"

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes[self._name(test)] = "fail"

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes[self._name(test)] = "fail"


def main(argv):
    path, ids = argv[0], argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    module = importlib.import_module(os.path.splitext(os.path.basename(path))[0])
    suite = unittest.TestLoader().loadTestsFromNames(ids, module)
    start = time.monotonic()
    result = unittest.TextTestRunner(resultclass=_Outcomes, verbosity=2).run(suite)
    print(json.dumps({"outcomes": result.outcomes, "seconds": time.monotonic() - start}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

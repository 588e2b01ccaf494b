"""Which exceptions skip a case rather than fail it: the skips of unittest, pytest and torch's
distributed test harness, told apart the same way wherever a case body runs (the worker loop,
the TestCase family's child, a torchrun script).

Imports neither torch nor pytest: each is looked up only where a case already loaded it.
"""

import sys
import unittest


def skip_reason(e):
    """Why `e` skips the case, or None when it is no skip: unittest.SkipTest, pytest.skip (its
    Skipped, when pytest is loaded), or a SystemExit with one of the exit codes of torch's
    TEST_SKIPS (when common_distributed is loaded: its test harness exits with those)."""
    if isinstance(e, unittest.SkipTest):
        return str(e) or "unittest.SkipTest"
    outcomes = sys.modules.get("_pytest.outcomes")
    if outcomes is not None and isinstance(e, outcomes.Skipped):
        return e.msg or "pytest.skip"
    if isinstance(e, SystemExit):
        common = sys.modules.get("torch.testing._internal.common_distributed")
        for skip in (getattr(common, "TEST_SKIPS", None) or {}).values():
            if e.code == getattr(skip, "exit_code", None):
                return skip.message
    return None

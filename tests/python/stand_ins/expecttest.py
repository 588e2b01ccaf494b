"""A test-only stand-in for the ``expecttest`` package (not packaged by Debian), which torch
1.13's ``torch.testing._internal.common_utils`` imports: what that module reads of it (ACCEPT,
TestCase) and nothing more. Its expect-test assertions are never used by cprr's suites."""

import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass

"""Suites run as cprr cases, unchanged: the case files a rank imports (case_files), PyTorch's
multi-process TestCase family (testcase, harness_parent), torchrun scripts (scripts) and
per-rank pytest items (pytest_items). Imports the distributed and case API rooms; the rank runs
what these register.
"""

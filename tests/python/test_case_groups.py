"""Process groups a case makes and leaves are ended with it (corpus/python/test_groups.py): in a
pooled world the next case finds only the groups the rank had before, as in a fresh world, so
fresh and pooled agree; a group the case destroyed itself is left alone, and a group this rank
is no member of costs nothing. Without the ending, the count after differs ("got 3, expected
1")."""

import json
import os

from conftest import run_tool

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "corpus", "python",
                     "test_groups.py")


def test_the_groups_a_case_left_are_ended_so_fresh_and_pooled_agree(tmp_path):
    run = run_tool("--python", CASES, "--backend", "cpu", "--mode", "both", "--db",
                   tmp_path / "run.db", "--json", "--timeout", "60", timeout=300)
    report = json.loads(run.stdout)
    assert len(report["cases"]) == 3, report
    for case in report["cases"]:
        assert case["as_expected"], case
        assert [e["status"] for e in case["executions"]] == ["pass", "pass"], case
        assert not case.get("fresh_vs_pool"), case
        assert not case.get("verdict"), case

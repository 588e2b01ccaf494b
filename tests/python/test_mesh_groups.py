"""The 2x2 mesh of corpus/python/test_mesh.py at W=4: each planted bug is named with its group, the
group's ranks and the collective's number (or the message's channel and number), where the
ranks called it; each twin and healthy case is clean; the groups are in the JSON, the store and
the trace."""

import json
import os
import sqlite3

import pytest

from conftest import run_tool

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "corpus", "python",
                     "test_mesh.py")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mesh")
    db = tmp / "run.db"
    run = run_tool("--python", CASES, "--backend", "cpu", "--mode", "fresh", "--db", db, "--json",
                   "--trace", tmp / "traces", timeout=600)
    report = json.loads(run.stdout)
    return {c["name"]: c for c in report["cases"]}, db, tmp / "traces"


def test_every_case_is_as_expected_and_only_the_bugs_have_verdicts(recorded):
    cases, _, _ = recorded
    assert len(cases) == 15, sorted(cases)
    for name, case in cases.items():
        assert case["as_expected"], case
        if name.startswith("bug/"):
            assert case["verdict"] == case["seeded_bug"], case
        elif name.startswith("fault/"):
            assert case["verdict"] == "hang", case
        else:
            assert case["verdict"] is None, case


def test_a_mismatch_inside_one_tp_group_names_the_group_its_ranks_and_number(recorded):
    m = recorded[0]["bug/py_tp_group_mismatch"]["collective_mismatch"]
    assert (m["group"], m["seq"], m["ranks"], m["values"]) == (2, 0, [2, 3], ["512", "384"]), m
    assert m["detail"].startswith("group 2 (ranks 2,3): collective #0 (all_reduce): rank 2 has "
                                  "bytes 512, rank 3 has bytes 384 (rank 2 at test_mesh.py:"), m


def test_an_object_collective_with_another_root_in_one_dp_group_is_named(recorded):
    m = recorded[0]["bug/py_object_root_mismatch"]["collective_mismatch"]
    assert m["detail"].startswith("group 4 (ranks 1,3): collective #0 (broadcast): rank 1 has "
                                  "root 1, rank 3 has root 3"), m


def test_an_moe_dispatch_whose_counts_were_never_exchanged_is_named_per_peer(recorded):
    m = recorded[0]["bug/py_moe_counts_not_exchanged"]["collective_mismatch"]
    assert m["field"] == "split", m
    # Rank 0 routes (0 + 2*1) % 5 + 1 = 3 rows to rank 1; rank 1 expects from rank 0 what it
    # sends there itself: (1 + 2*0) % 5 + 1 = 2 rows (of 8 f32: 32 bytes).
    assert m["detail"].startswith("collective #0 (all_to_all_v): rank 0 sends 3 rows (96 bytes) "
                                  "to rank 1, rank 1 expects 2 rows (64 bytes)"), m


def test_a_dp_group_hang_names_the_member_that_never_joined(recorded):
    summary = recorded[0]["fault/py_dp_group_hang"]["executions"][0]["summary"]
    assert "group 4 (ranks 1,3): rank 3 never joined collective #1 (all_reduce) at " \
           "test_mesh.py:" in summary, summary
    assert "rank 0 never joined" not in summary, "rank 0 is in no group rank 1 waits in"


def test_a_recv_never_sent_names_both_ranks_the_number_and_the_line(recorded):
    summary = recorded[0]["fault/py_pipeline_recv_never_sent"]["executions"][0]["summary"]
    assert "rank 2 blocked in recv #3 from rank 1 at test_mesh.py:" in summary, summary
    assert "; rank 1 sent 3" in summary, summary


def test_an_isend_buffer_rewritten_before_the_wait_is_a_race_with_its_fix(recorded):
    case = recorded[0]["bug/py_isend_buffer_rewritten"]
    assert "dist.isend at test_mesh.py:" in case["race"]["detail"], case["race"]
    assert case["race"]["fix"].startswith("call wait() on the Work that op #"), case["race"]


def test_the_groups_are_in_the_json_the_store_and_the_trace(recorded):
    cases, db, traces = recorded
    execution = cases["healthy/py_mesh_tp_dp"]["executions"][0]
    want = [{"id": 1, "ranks": [0, 1], "backend": "gloo", "name": ""},
            {"id": 2, "ranks": [2, 3], "backend": "gloo", "name": ""},
            {"id": 3, "ranks": [0, 2], "backend": "gloo", "name": ""},
            {"id": 4, "ranks": [1, 3], "backend": "gloo", "name": ""}]
    assert execution["groups"] == want, execution["groups"]
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT rank, id, ranks FROM process_group WHERE execution_id = ? "
                           "ORDER BY rank, id", (execution["id"],)).fetchall()
        # Each rank records the groups it is in.
        assert rows == [(0, 1, "0,1"), (0, 3, "0,2"), (1, 1, "0,1"), (1, 4, "1,3"),
                        (2, 2, "2,3"), (2, 3, "0,2"), (3, 2, "2,3"), (3, 4, "1,3")], rows
        calls = con.execute("SELECT rank, group_id, seq, kind, members FROM collective "
                            "WHERE execution_id = ? ORDER BY rank, position",
                            (execution["id"],)).fetchall()
        assert calls[:2] == [(0, 1, 0, "all_gather", 0b0011), (0, 3, 0, "all_reduce", 0b0101)]
    # The healthy case's trace, from its replay: an arrow per group's collective.
    trace_file = traces / "healthy.json"
    replay = run_tool("--db", db, "--case", cases["healthy/py_mesh_tp_dp"]["id"], "--mode",
                      "fresh", "--trace", trace_file, tool="cpreplay", timeout=300)
    assert replay.returncode == 0, replay.stderr
    with open(trace_file) as f:
        trace = json.load(f)
    assert trace["otherData"]["groups"] == want
    flows = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "collective"
             and e.get("ph") == "s"}
    assert flows == {"all_gather #0 (group 1)", "all_gather #0 (group 2)",
                     "all_reduce #0 (group 3)", "all_reduce #0 (group 4)"}, flows

"""cprecord --jobs: worlds running side by side share nothing by accident. A suite that serves a
TCPStore on MASTER_PORT (as torchrun's env:// rendezvous does) gets a port of its own per job, so
two such cases at once both pass; each execution records the cores its job ran on."""

import json
import textwrap

from conftest import record_python

CASES = textwrap.dedent('''
    import os
    import socket
    import time

    import cprr


    @cprr.case(name="jobs/serve_master_port", world_sizes=[2], grid={"copy": [1, 2, 3, 4]})
    def serve(ctx):
        # Rank 0 listens on MASTER_PORT for a while, as a suite's TCPStore server would: two
        # worlds given one port at once would fail the second with EADDRINUSE.
        if ctx.rank == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", int(os.environ["MASTER_PORT"])))
                s.listen()
                time.sleep(1.0)
''')


def test_two_jobs_serving_master_port_at_once_each_get_their_own(tmp_path):
    (tmp_path / "test_ports.py").write_text(CASES)
    done = record_python(tmp_path, "--mode", "fresh", "--jobs", "2", "--json",
                         "--db", tmp_path / "jobs.db")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    executions = [e for c in report["cases"] for e in c["executions"]]
    assert len(executions) == 4
    assert all(e["status"] == "pass" for e in executions), executions
    assert "2 jobs, each on its own cores" in done.stderr

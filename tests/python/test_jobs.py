"""cprecord --jobs: worlds running side by side share nothing by accident. A suite that serves a
TCPStore on MASTER_PORT (as torchrun's env:// rendezvous does) gets a port no other world running
at the same time has: in one run, each job claims its own; two runs at once on one host, each with
--jobs 2, claim four different ones. Each execution records its port and the cores its job ran
on."""

import concurrent.futures
import json
import socket
import sqlite3
import textwrap

from conftest import record_python, run_tool

# Rank 0 of each world listens on MASTER_PORT, as a suite's TCPStore server would, and stays
# listening until every world the test runs at once listens too: a file per listener in the
# folder CPRR_TEST_MEET names, until CPRR_TEST_WORLDS of them are there. Two worlds given one port
# fail the second with EADDRINUSE; worlds that never overlap fail on the deadline, saying so.
CASES = textwrap.dedent('''
    import os
    import socket
    import time

    import cprr


    @cprr.case(name="jobs/serve_master_port", world_sizes=[2], grid={"copy": [1, 2]},
               timeout_s=150)
    def serve(ctx):
        if ctx.rank != 0:
            return
        meet, worlds = os.environ["CPRR_TEST_MEET"], int(os.environ["CPRR_TEST_WORLDS"])
        port = os.environ["MASTER_PORT"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", int(port)))
            s.listen()
            open(os.path.join(meet, f"{port}-{os.getpid()}"), "w").close()
            deadline = time.monotonic() + 120
            while len(os.listdir(meet)) < worlds:
                assert time.monotonic() < deadline, f"{os.listdir(meet)} alone"  # why: the deadline
                time.sleep(0.01)  # why: the poll interval of a wait that ends on the files
''')


def record_two_jobs(folder, meet, worlds, db):
    return record_python(folder, "--mode", "fresh", "--jobs", "2", "--json", "--db", db,
                         env={"CPRR_TEST_MEET": str(meet), "CPRR_TEST_WORLDS": str(worlds)})


def passed(done):
    assert done.returncode == 0, done.stdout + done.stderr
    executions = [e for c in json.loads(done.stdout)["cases"] for e in c["executions"]]
    assert len(executions) == 2
    assert all(e["status"] == "pass" for e in executions), executions
    assert "2 jobs, each on its own cores" in done.stderr


def recorded_ports(db):
    with sqlite3.connect(db) as con:
        return [row[0] for row in con.execute("SELECT master_port FROM execution ORDER BY id")]


def test_two_jobs_serving_master_port_at_once_each_get_their_own(tmp_path):
    (tmp_path / "test_ports.py").write_text(CASES)
    meet = tmp_path / "meet"
    meet.mkdir()
    passed(record_two_jobs(tmp_path, meet, 2, tmp_path / "jobs.db"))
    ports = recorded_ports(tmp_path / "jobs.db")
    assert len(set(ports)) == 2 and all(p > 0 for p in ports), ports
    assert sorted(int(f.name.split("-")[0]) for f in meet.iterdir()) == sorted(ports)


def test_two_recordings_with_two_jobs_each_at_once_share_no_port(tmp_path):
    (tmp_path / "test_ports.py").write_text(CASES)
    meet = tmp_path / "meet"
    meet.mkdir()
    dbs = [tmp_path / "a.db", tmp_path / "b.db"]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(record_two_jobs, tmp_path, meet, 4, db) for db in dbs]
        for run in runs:
            passed(run.result())
    ports = recorded_ports(dbs[0]) + recorded_ports(dbs[1])
    assert len(set(ports)) == 4, f"four worlds at once, ports {ports}"


# A case that listens on its MASTER_PORT and leaves a file named after it in CPRR_TEST_MEET.
NOTE_PORT = textwrap.dedent('''
    import os
    import socket

    import cprr


    @cprr.case(name="jobs/note_master_port", world_sizes=[2])
    def note(ctx):
        if ctx.rank == 0:
            port = os.environ["MASTER_PORT"]
            with socket.socket() as s:
                s.bind(("127.0.0.1", int(port)))
            open(os.path.join(os.environ["CPRR_TEST_MEET"], port), "w").close()
''')


def test_a_replay_takes_the_recorded_port_again_or_a_free_one_and_says_so(tmp_path):
    (tmp_path / "test_note.py").write_text(NOTE_PORT)
    meet = tmp_path / "meet"
    meet.mkdir()
    env = {"CPRR_TEST_MEET": str(meet)}
    db = tmp_path / "note.db"
    done = record_python(tmp_path, "--mode", "fresh", "--json", "--db", db, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    (case,) = json.loads(done.stdout)["cases"]
    (recorded,) = recorded_ports(db)
    assert [f.name for f in meet.iterdir()] == [str(recorded)]

    def replay():
        for f in meet.iterdir():
            f.unlink()
        run = run_tool("--db", db, "--json", "--mode", "fresh", "--case", case["id"],
                       tool="cpreplay", env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        return [f.name for f in meet.iterdir()], "\n".join(json.loads(run.stdout)["log"])

    ports, log = replay()
    assert ports == [str(recorded)], "the record's port was free: the replay takes it again"
    assert "MASTER_PORT" not in log, log
    with socket.create_server(("0.0.0.0", recorded)):  # something else holds it now
        ports, log = replay()
    assert len(ports) == 1 and ports != [str(recorded)], ports
    assert (f"the replays' MASTER_PORT is {ports[0]}: the record's ({recorded}) is in use"
            in log), log

"""Python cases with ranks started by a launcher (``cprecord --python --launcher mpirun|srun``):
the launcher starts one cpworker node agent per node for the whole run, which connects back
and forks every rank from its template of cprr-pyworker with the case files, as local ranks are
forked. The seeds and the faults of
corpus/python get the same results, case by case in both modes, as with local ranks; a replay of
the launched run starts its worlds through the same launcher and names the leak's polluter.

mpirun runs here when Open MPI is installed (tools/setup.sh installs it); srun needs a Slurm
cluster: ctest's srun_python_matches_local starts a private one and sets SLURM_CONF.
"""

import json
import os
import shutil

import pytest

from conftest import record_python, run_tool

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "corpus", "python")
FILES = [os.path.join(CORPUS, name) for name in ("test_seeds.py", "test_faults.py")]
# Logs each launch to $CPRR_TEST_LAUNCH_LOG, then runs mpirun.
WRAPPER = os.path.join(os.path.dirname(HERE), "replayer", "fixture", "launcher_wrapper.sh")
# Open MPI refuses root unless told twice (CI runs as root); a user passes the same.
MPI_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def results_of(doc):
    """Per label what must not depend on how ranks started: status, verdict, expectation, and
    each execution's mode and status. Not an uninitialized read's executions: whether
    torch.empty returns zeros or garbage depends on the process's heap, and a launched rank
    starts without the template a local one forks from (the read is found either way). Not a
    collective mismatch's status: a launched world has no live mismatch check (its flight
    records are not shipped), so whether the transport's own error (crash) or the deadline
    (hang) ends it first is timing (the mismatch is named either way)."""
    out = {}
    for c in doc["cases"]:
        status = c["status"]
        modes = sorted(f"{e['mode']}={e['status']}" for e in c["executions"])
        if c.get("verdict") == "uninitialized_read":
            modes = None
        if c.get("verdict") == "collective_mismatch":
            status, modes = None, None
        out[c["label"]] = (status, c.get("verdict"), c["as_expected"], modes)
    return out


# A guard against a hung recording, not a bound on its time: through mpirun each of the ~72
# executions' fresh worlds is a launcher job (about 1 s idle, 10 s and more on a loaded 2-core box).
RECORD_GUARD_S = 1800


def record(tmp_path, name, *launch, env=None):
    run = record_python(FILES[0], "--python", FILES[1], "--mode", "both", "--json", "--db",
                        tmp_path / f"{name}.db", *launch, env=env, timeout=RECORD_GUARD_S)
    assert run.stdout, run.stderr[-3000:]
    return json.loads(run.stdout), run


def expect_same_as_local(tmp_path, launcher, env, *flags):
    local, _ = record(tmp_path, "local")
    launched, run = record(tmp_path, launcher, "--launcher", launcher, *flags, env=env)
    assert launched["launcher"] == (flags[-1] if flags else launcher)  # --launcher-path's
    a, b = results_of(local), results_of(launched)
    assert len(a) >= 16 and set(a) == set(b), (sorted(a), sorted(b))
    for label in a:
        assert a[label] == b[label], (label, a[label], b[label], run.stderr[-3000:])
    # The seeds' bugs and the faults are among them, not only passing cases.
    verdicts = {v[1] for v in a.values()}
    assert {"allocator_order", "collective_mismatch", "uninitialized_read", "crash",
            "hang"} <= verdicts, verdicts
    assert any(c.get("fresh_vs_pool") for c in launched["cases"]), "no leak diverged"
    return launched


def test_python_cases_through_mpirun_match_local_and_replay_through_it(tmp_path):
    if shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not on PATH (tools/setup.sh installs openmpi-bin)")
    log = tmp_path / "launches.log"
    env = dict(MPI_ROOT, CPRR_TEST_LAUNCH_LOG=str(log))
    launched = expect_same_as_local(tmp_path, "mpirun", env, "--launcher-path", WRAPPER)
    # One launch for the whole run: the node agent, which forks each rank from its template of
    # the Python worker with the files.
    launches = log.read_text().splitlines()
    assert len(launches) == 1, launches
    assert "cpworker --agent" in launches[0] and " -- " in launches[0], launches[0]
    assert "cprr-pyworker --cases" in launches[0] and "test_seeds.py" in launches[0], launches[0]
    log.unlink()
    victim = next(c for c in launched["cases"] if c.get("fresh_vs_pool"))
    replay = run_tool("--db", tmp_path / "mpirun.db", "--case", victim["id"], "--json",
                      tool="cpreplay", env=env, timeout=300)
    doc = json.loads(replay.stdout)
    assert doc["verdict"] == "state_leak", replay.stdout[-3000:] + replay.stderr[-3000:]
    assert "cprr-pyworker --cases" in log.read_text()  # the replay's worlds: the same launcher


def test_python_cases_through_srun_match_local(tmp_path):
    conf = os.environ.get("SLURM_CONF")
    if not conf or not os.path.exists(conf) or shutil.which("srun") is None:
        pytest.skip("no Slurm cluster to run on: ctest's srun_python_matches_local starts a "
                    "private one (as root, with Slurm installed by tools/setup.sh)")
    expect_same_as_local(tmp_path, "srun", None)

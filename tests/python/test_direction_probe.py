"""cpreplay's probe replay on a Python case: a call declared with tensors it is
handed without knowing how (cprr.accesses uses=...) writes some of them past the dispatcher; one
replay copies their bytes around the call and names what it changed as writes and the rest as
left unchanged, and the checks read the logs with those directions. The comparison waits for the
block's end: a dispatcher op inside it comes before the call's own work."""

import json
import re
import textwrap

from conftest import record_python, run_tool

CASES = textwrap.dedent('''
    import torch

    import cprr


    @cprr.case(name="healthy/opaque_fill", world_sizes=[1])
    def opaque_fill(ctx):
        src = torch.arange(64, dtype=torch.float32)
        dst = torch.zeros(64)
        with cprr.accesses("ext_fill", uses=[src, dst]):
            src.add(0)  # a dispatcher op of the block's own, logged before the call's work
            dst.numpy()[:16] = src.numpy()[:16] + 1  # past the dispatcher, as an extension does
        ctx.output("sum", dst.sum().reshape(1))
''')


def test_the_probe_replay_names_what_a_declared_call_changed(tmp_path):
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "test_opaque.py").write_text(CASES)
    db = tmp_path / "probe.db"
    run = record_python(folder, "--db", db, "--json", "--mode", "both")
    (case,) = json.loads(run.stdout)["cases"]
    assert case["as_expected"], case
    replay = run_tool("--db", db, "--json", "--case", case["id"], tool="cpreplay")
    rep = json.loads(replay.stdout)
    assert rep["verdict"] == "reproduced", rep["log"]
    (line,) = rep["learned"]
    # dst's first 16 floats changed: bytes [0, 64); src and the rest of dst did not.
    assert re.search(r"op #\d+ \(\w+ 'ext_fill at test_opaque\.py:11'\): "
                     r"writes 'torch\.zeros\(64,\) at test_opaque\.py:10' \[0, 64\); "
                     r"leaves 'torch\.arange\(64,\) at test_opaque\.py:9' \[0, 256\), "
                     r"'torch\.zeros\(64,\) at test_opaque\.py:10' \[64, 256\) unchanged$",
                     line), line
    assert rep["replays"] == 3, rep["log"]  # fresh, pooled, the probe

"""cpreplay's race confirmation on a Python case: a replay's sync after an async
torch.distributed call waits for the call itself (its Work: gloo's thread, which no device sync
covers), so the serialized replay is a true reference, the fix applied (a sync right after the
call) forces the order the recorded runs did not take, and the sync bisection puts the cause
right after the call (the edge a race confirmed by its fix gets, applied to an async
collective). Which of the two
confirms depends on whether the unperturbed runs agree on this machine."""

import json
import re
import textwrap

from conftest import record_python, run_tool

CASES = textwrap.dedent('''
    import torch
    import torch.distributed as dist

    import cprr


    @cprr.case(name="bug/norm_before_reduce", world_sizes=[2], seeded_bug="stream_race")
    def norm_before_reduce(ctx):
        grad = torch.arange(1 << 16, dtype=torch.float32) * (ctx.rank + 1)
        work = dist.all_reduce(grad, async_op=True)
        norm = grad.norm()  # the bug: read while the all-reduce writes it
        work.wait()
        ctx.output("norm", norm.reshape(1))
''')


def record_and_replay(tmp_path, file_name, source, mode, *replay_args):
    """Records `source` (one seeded stream race) as FILE_NAME with --mode MODE, checks the
    record names the race, and returns cpreplay --json's report of it, whose verdict it checks."""
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / file_name).write_text(source)
    db = tmp_path / "race.db"
    run = record_python(folder, "--db", db, "--json", "--mode", mode)
    (case,) = json.loads(run.stdout)["cases"]
    assert case["verdict"] == "stream_race", case
    replay = run_tool("--db", db, "--json", "--case", case["id"], *replay_args, tool="cpreplay")
    rep = json.loads(replay.stdout)
    assert rep["verdict"] == "stream_race", rep["log"]
    return rep


def test_a_sync_after_an_async_collective_waits_for_it(tmp_path):
    rep = record_and_replay(tmp_path, "test_norm.py", CASES, "both")
    first = rep["race"]["first"]
    assert first["name"].startswith("dist.all_reduce(async_op=True) at test_norm.py:"), first
    # Serialized, the norm is of the reduced gradient: 3 x rank 0's (1 + 2), never a mix.
    serial = [line for line in rep["log"] if line.startswith("serialized replay")]
    assert serial and "the reference outputs" in serial[0], rep["log"]
    conf = rep["confirmation"]
    if "fix_applied" in rep["race"]["confirmed_by"]:
        # Runs that agree read early every time: holding the norm until the all-reduce completed
        # changes the outputs only because that sync waited for the Work. The order is named and
        # the bisection not needed.
        assert rep["race_order"].startswith("the recorded runs took rank 0 stream 0 op #"), rep
        assert f"op #{first['op']} (kernel 'dist.all_reduce" in rep["race_order"], rep
        assert conf["sync_edge"] is None, rep["log"]
        return
    # Runs that disagree: the sync bisection puts the cause right after the all-reduce.
    assert conf["sync_edge"] is not None, rep["log"]
    assert conf["sync_edge"]["after_op"] == first["op"], (conf, first)
    assert conf["sync_agrees"], rep["log"]
    assert "sync_bisection" in rep["race"]["confirmed_by"], rep["race"]
    # The reference is right: a host sync after the all-reduce gives the serialized outputs.
    assert any(re.match(rf"host sync after ops #{first['op']}\.\.#\d+ .*: the serialized outputs",
                        line) for line in rep["log"]), rep["log"]


P2P_CASES = textwrap.dedent('''
    import torch
    import torch.distributed as dist

    import cprr


    @cprr.case(name="bug/sum_before_recv", world_sizes=[2], seeded_bug="stream_race")
    def sum_before_recv(ctx):
        acts = torch.arange(4096, dtype=torch.float32) * (ctx.rank + 1)
        recv = torch.zeros(4096)
        peer = 1 - ctx.rank
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, acts, peer),
                                        dist.P2POp(dist.irecv, recv, peer)])
        total = recv.sum()  # the bug: the receive may still be writing recv
        for w in works:
            w.wait()
        ctx.output("total", total.reshape(1))
''')


def test_a_sync_after_a_send_does_not_leave_the_cases_own_wait_waiting(tmp_path):
    # A Gloo send's Work waits for one more send at each wait(): the replay's sync after the
    # batch waited for it once, so the case's own wait() must not wait again, or the serialized
    # replay and the fix applied hang until the deadline and confirm nothing.
    rep = record_and_replay(tmp_path, "test_p2p.py", P2P_CASES, "fresh", "--timeout", "20")
    serial = [line for line in rep["log"] if line.startswith("serialized replay")]
    assert serial and "the reference outputs" in serial[0], rep["log"]
    first, second = rep["race"]["first"], rep["race"]["second"]
    assert first["name"].startswith("dist.batch_isend_irecv at test_p2p.py:"), first
    (fix,) = [line for line in rep["log"] if line.startswith("fix applied")]
    assert "): hang (" not in fix, rep["log"]  # the status a hung replay names
    if fix.startswith("fix applied: skipped, as the unperturbed runs already disagree"):
        # The unperturbed runs disagree on this machine (the receive lands before the sum or
        # after it), so the fix applied is not run: the replays with a sync right after the
        # batch are the sync bisection's. The edge it found is after the batch, so a replay with
        # that sync completed with the serialized outputs, the case's own wait() after it.
        edge = {"after_op": first["op"], "rank": second["rank"]}
        assert rep["confirmation"]["sync_edge"] == edge, rep["log"]
        assert any(re.match(rf"host sync after ops #{first['op']}\.\.#\d+ .*: the serialized "
                            r"outputs$", line) for line in rep["log"]), rep["log"]
        return
    # Run: it completed and was compared with the unperturbed runs, which agree with each other
    # (the same outputs or not); a replay that hung or ended otherwise gets no such line.
    held = (f"fix applied (op #{second['op']} held until op #{first['op']} of rank "
            f"{first['rank']} completed): ")
    assert re.match(re.escape(held) + r"(the outputs of|differs from) the \d+ unperturbed runs",
                    fix), rep["log"]

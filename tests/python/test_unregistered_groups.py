"""Process groups torch's registry does not know, and torch's RPC in pooled ranks, recorded through
cprecord on cpu, fresh and pooled.

A group constructed directly (``dist.ProcessGroupGloo(store, rank, size)``, as RPC's TensorPipe
agent makes its own) is logged like any other (cprr.distributed.groups): its collectives are in
the log under one number on every rank, the number of its construction since the case began
(two groups used in opposite orders on the two ranks keep their numbers: numbered at first use,
they swapped and the sizes disagreed), its members and backend read from it, and a mismatch on
it is named. A case that leaves torch's RPC initialized, or initialized it at all (its RRef
context keeps its first agent for the process's life: cprr.distributed.rpc_state), has its world
replaced, named in its note; the next pooled case initializes RPC as a fresh one does."""

import json
import sqlite3
import textwrap

from conftest import record_python

GROUPS = textwrap.dedent('''
    import datetime
    import os

    import torch
    import torch.distributed as dist

    import cprr


    def _group(ctx, name):
        # As a library makes its own: torch's class, a store of its own, no new_group.
        store = dist.PrefixStore(name, dist.FileStore(ctx.shared_path("store"), ctx.world_size))
        return dist.ProcessGroupGloo(store, ctx.rank, ctx.world_size,
                                     datetime.timedelta(seconds=30))


    def _two_groups(ctx, rows_b):
        a, b = _group(ctx, "a"), _group(ctx, "b")
        ta = torch.ones(4) * (ctx.rank + 1)
        tb = torch.ones(rows_b) * (ctx.rank + 1)
        # Rank 0 uses a first, rank 1 b first: each group is one number on both ranks anyway.
        if ctx.rank == 0:
            works = [dist.all_reduce(ta, group=a, async_op=True),
                     dist.all_reduce(tb, group=b, async_op=True)]
        else:
            works = [dist.all_reduce(tb, group=b, async_op=True),
                     dist.all_reduce(ta, group=a, async_op=True)]
        for w in works:
            w.wait()
        gathered = [None] * ctx.world_size
        dist.all_gather_object(gathered, {"rank": ctx.rank}, group=a)
        assert [g["rank"] for g in gathered] == list(range(ctx.world_size)), gathered
        ctx.output("a", ta)
        ctx.output("b", tb)


    @cprr.case(name="group/constructed", world_sizes=[2])
    def constructed(ctx):
        _two_groups(ctx, rows_b=8)


    @cprr.case(name="group/constructed_again", world_sizes=[2])
    def constructed_again(ctx):
        _two_groups(ctx, rows_b=8)


    @cprr.case(name="bug/constructed_group_mismatch", world_sizes=[2], timeout_s=30,
               seeded_bug="collective_mismatch",
               description="rank 1 all-reduces 6 elements on a constructed group, rank 0 4")
    def constructed_mismatch(ctx):
        g = _group(ctx, "m")
        dist.all_reduce(torch.ones(4 if ctx.rank == 0 else 6), group=g)
''')


def _collectives(db, name, mode):
    with sqlite3.connect(db) as c:
        return c.execute(
            "SELECT c.rank, c.group_id, c.kind, c.bytes FROM collective c "
            "JOIN execution e ON e.id = c.execution_id JOIN test_case t ON t.id = e.case_id "
            "WHERE t.name = ? AND e.mode = ? ORDER BY c.rank, c.position",
            (name, mode)).fetchall()


def _groups(db, name, mode):
    with sqlite3.connect(db) as c:
        return c.execute(
            "SELECT g.rank, g.id, g.ranks, g.backend FROM process_group g "
            "JOIN execution e ON e.id = g.execution_id JOIN test_case t ON t.id = e.case_id "
            "WHERE t.name = ? AND e.mode = ? ORDER BY g.rank, g.id", (name, mode)).fetchall()


def test_a_constructed_group_has_one_number_on_every_rank_fresh_and_pooled(tmp_path):
    (tmp_path / "test_groups.py").write_text(GROUPS)
    db = tmp_path / "run.db"
    run = record_python(tmp_path / "test_groups.py", "--mode", "both", "--db", db, "--json",
                        "--timeout", "60", "--filter", "^group/")
    report = json.loads(run.stdout)
    for case in report["cases"]:
        assert [e["status"] for e in case["executions"]] == ["pass", "pass"], case
        assert not case.get("verdict") and not case.get("fresh_vs_pool"), case
    for name in ("group/constructed", "group/constructed_again"):
        for mode in ("fresh", "pool"):
            # a's all_reduce (16 bytes) is group 1000, b's (32 bytes) 1001, on both ranks;
            # the object collective's two all_gathers are a's too.
            calls = _collectives(db, name, mode)
            by_rank = {r: sorted((g, k, b) for rr, g, k, b in calls if rr == r) for r in (0, 1)}
            assert by_rank[0] == by_rank[1], calls
            assert (1000, "all_reduce", 16) in by_rank[0] and \
                (1001, "all_reduce", 32) in by_rank[0], calls
            assert {g for _, g, k, _ in calls if k == "all_gather"} == {1000}, calls
            assert _groups(db, name, mode) == [
                (r, g, "0,1", "gloo") for r in (0, 1) for g in (1000, 1001)]


def test_a_mismatch_on_a_constructed_group_is_named(tmp_path):
    (tmp_path / "test_groups.py").write_text(GROUPS)
    run = record_python(tmp_path / "test_groups.py", "--mode", "fresh", "--json",
                        "--db", tmp_path / "run.db", "--timeout", "60", "--filter", "^bug/")
    case = json.loads(run.stdout)["cases"][0]
    assert case["verdict"] == "collective_mismatch", case
    assert case["as_expected"], case
    assert "group 1000" in json.dumps(case), case


RPC = textwrap.dedent('''
    import torch
    import torch.distributed.rpc as rpc

    import cprr


    def _init(ctx):
        options = rpc.TensorPipeRpcBackendOptions(
            init_method="file://" + ctx.shared_path("rpc_store"))
        rpc.init_rpc(f"worker{ctx.rank}", rank=ctx.rank, world_size=ctx.world_size,
                     rpc_backend_options=options)


    def _remote_sum(ctx):
        peer = f"worker{(ctx.rank + 1) % ctx.world_size}"
        rref = rpc.remote(peer, torch.add, args=(torch.ones(2), ctx.rank))
        total = rref.to_here()
        del rref
        return total


    @cprr.case(name="rpc/a_left_running", world_sizes=[2])
    def left_running(ctx):
        _init(ctx)
        ctx.output("sum", _remote_sum(ctx))
        # no rpc.shutdown(): the agent is left running


    @cprr.case(name="rpc/b_shut_down", world_sizes=[2])
    def shut_down(ctx):
        _init(ctx)
        ctx.output("sum", _remote_sum(ctx))
        rpc.shutdown()


    @cprr.case(name="rpc/c_after_a_clean_one", world_sizes=[2])
    def after_a_clean_one(ctx):
        _init(ctx)
        ctx.output("sum", _remote_sum(ctx))
        rpc.shutdown()
''')


def test_a_case_that_initialized_rpc_has_its_world_replaced_and_the_next_case_is_unharmed(
        tmp_path):
    (tmp_path / "test_rpc.py").write_text(RPC)
    run = record_python(tmp_path / "test_rpc.py", "--mode", "both", "--json",
                        "--db", tmp_path / "run.db", "--timeout", "60")
    cases = {c["name"]: c for c in json.loads(run.stdout)["cases"]}
    assert sorted(cases) == ["rpc/a_left_running", "rpc/b_shut_down",
                             "rpc/c_after_a_clean_one"], cases
    for case in cases.values():
        # b after a left RPC running: "RPC is already initialized" without the replacement; c
        # after b shut down cleanly: its RRef's messages went through b's dead agent.
        assert [e["status"] for e in case["executions"]] == ["pass", "pass"], case
        assert not case.get("verdict") and not case.get("fresh_vs_pool"), case
    pooled = {n: next(e for e in c["executions"] if e["mode"] == "pool")
              for n, c in cases.items()}
    assert "torch's RPC still initialized" in pooled["rpc/a_left_running"]["note"], pooled
    assert "the world is replaced" in pooled["rpc/a_left_running"]["note"], pooled
    assert "torch's RPC initialized in this process" in pooled["rpc/b_shut_down"]["note"], \
        pooled
    worlds = [pooled[n]["world"] for n in sorted(pooled)]
    assert len(set(worlds)) == 3, pooled  # each case in a world where RPC never ran

"""dist.batch_isend_irecv under cprr works as without it (torch's coalescing takes only its own
Work objects, which cprr's wrappers used to hand it in place), its ops are logged as one async
call, and reading a received buffer before waiting for its Work is named as a stream race; the
twin that waits first is clean."""

import json
import textwrap

import pytest

from conftest import record_python

CASES = textwrap.dedent('''
    import torch
    import torch.distributed as dist

    import cprr


    @cprr.case(name="p2p/batch_ring", world_sizes=[2, 3])
    def batch_ring(ctx):
        send = torch.full((4,), float(ctx.rank))
        recv = torch.empty(4)
        right, left = (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size
        ops = [dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        assert recv[0].item() == float(left), recv
        ctx.output("recv", recv)


    def _exchange(ctx, wait_first):
        send = torch.full((1024,), float(ctx.rank))
        recv = torch.zeros(1024)
        peer = 1 - ctx.rank
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peer),
                                        dist.P2POp(dist.irecv, recv, peer)])
        if wait_first:
            for w in works:  # (once: gloo's send Work waits for one more send at each wait)
                w.wait()
        total = recv.sum()  # the bug unless waited for: the receive may still write it
        if not wait_first:
            for w in works:
                w.wait()
        ctx.output("recv", recv)


    @cprr.case(name="bug/batch_recv_read_early", world_sizes=[2], seeded_bug="stream_race")
    def read_early(ctx):
        _exchange(ctx, wait_first=False)


    @cprr.case(name="fixed/batch_recv_read_early", world_sizes=[2])
    def read_after_wait(ctx):
        _exchange(ctx, wait_first=True)


    @cprr.case(name="z/after_the_batches", world_sizes=[2, 3])
    def after(ctx):
        t = torch.ones(4)
        dist.all_reduce(t)
        ctx.output("t", t)
''')


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("batch")
    (folder / "test_batch.py").write_text(CASES)
    run = record_python(folder, "--mode", "both", "--db", folder / "run.db", "--json",
                        "--timeout", "30")
    return json.loads(run.stdout)


def _case(report, label):
    return next(c for c in report["cases"] if c["label"] == label)


@pytest.mark.parametrize("label", ["p2p/batch_ring@2", "p2p/batch_ring@3",
                                   "z/after_the_batches@2", "z/after_the_batches@3",
                                   "fixed/batch_recv_read_early@2"])
def test_the_batches_and_the_cases_after_them_pass_clean(report, label):
    case = _case(report, label)
    assert [e["status"] for e in case["executions"]] == ["pass", "pass"], case
    assert case["as_expected"] and not case.get("verdict"), case


def test_a_receive_read_before_its_work_is_waited_for_is_a_stream_race(report):
    case = _case(report, "bug/batch_recv_read_early@2")
    assert case["verdict"] == "stream_race", case
    race = case["race"]
    assert "dist.batch_isend_irecv" in race["detail"], race
    assert "aten.sum" in race["detail"], race

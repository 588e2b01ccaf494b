"""Reads of never-written bytes in a Python case, end to end through cprecord on cpu: every one
is reported (the first is the finding, the others follow it in the table and in --json "more"),
one per buffer however often it is read, the same read on several ranks as one; a message,
a scatter and a gather carry the sender's never-written bytes to the receiver's use."""

import json
import textwrap

from conftest import record_python

CASES = textwrap.dedent('''
    import torch
    import torch.distributed as dist
    import cprr

    @cprr.case(name="bug/two_empty_buffers", world_sizes=[2], seeded_bug="uninitialized_read")
    def two_empty_buffers(ctx):
        grad = torch.empty(64)
        stats = torch.empty(16)
        total = grad.sum() + grad.sum()     # grad read twice: one finding
        if ctx.rank == 1:
            total = total + stats.mean()    # another buffer, on rank 1 only
        ctx.output("total", total.reshape(1))

    @cprr.case(name="bug/sent_empty", world_sizes=[2], seeded_bug="uninitialized_read")
    def sent_empty(ctx):
        if ctx.rank == 0:
            dist.send(torch.empty(8), dst=1)   # never written
        else:
            got = torch.zeros(8)
            dist.recv(got, src=0)
            ctx.output("sum", got.sum().reshape(1))

    def _half_written_scatter_and_gather(ctx, read_all):
        # Rank 0 scatters chunks of which it wrote the first halves; every rank gathers its
        # chunk back to rank 0. Reading only the written halves is correct.
        w = ctx.world_size
        chunks = torch.empty(w, 4)
        chunks[:, :2] = 1.0
        part = torch.empty(4)
        dist.scatter(part, list(chunks.unbind(0)) if ctx.rank == 0 else None, src=0)
        back = torch.empty(w, 4)
        dist.gather(part, list(back.unbind(0)) if ctx.rank == 0 else None, dst=0)
        total = part[:2].sum()
        if ctx.rank == 0:
            total = total + (back.sum() if read_all else back[:, :2].sum())
        ctx.output("total", total.reshape(1))

    @cprr.case(name="healthy/scatter_gather_halves", world_sizes=[2])
    def scatter_gather_halves(ctx):
        _half_written_scatter_and_gather(ctx, read_all=False)

    @cprr.case(name="bug/scatter_gather_all", world_sizes=[2], seeded_bug="uninitialized_read")
    def scatter_gather_all(ctx):
        _half_written_scatter_and_gather(ctx, read_all=True)
''')


def test_every_never_written_buffer_read_is_reported_once(tmp_path):
    (tmp_path / "test_two.py").write_text(CASES)
    run = record_python(tmp_path, "--mode", "fresh", "--db", tmp_path / "run.db", "--json")
    cases = json.loads(run.stdout)["cases"]
    case = next(c for c in cases if c["label"] == "bug/two_empty_buffers@2")
    assert case["verdict"] == "uninitialized_read", run.stdout[-3000:] + run.stderr[-3000:]
    first = case["uninitialized_read"]
    assert first["rank"] == 0 and first["buffer"].startswith("torch.empty(64,)"), first
    # grad's second read adds nothing, rank 1's grad read is the same line: folded into rank 0's
    assert "(the same read on rank 1)" in first["detail"], first
    more = first["more"]
    assert [(m["rank"], m["buffer"].split(" at ")[0]) for m in more] == [
        (1, "torch.empty(16,)")], more
    table = record_python(tmp_path, "--mode", "fresh", "--db", tmp_path / "run2.db").stdout
    assert table.count("  also: rank 1 ") == 1, table


def test_a_message_carries_the_senders_never_written_bytes_to_the_use(tmp_path):
    (tmp_path / "test_two.py").write_text(CASES)
    run = record_python(tmp_path, "--mode", "fresh", "--db", tmp_path / "run.db", "--json",
                        "--filter", "sent_empty")
    read = json.loads(run.stdout)["cases"][0]["uninitialized_read"]
    assert read["rank"] == 1 and "aten.sum" in read["name"], read
    assert read["copied"].startswith("sent by rank 0 in op #"), read
    assert "(send #0 to rank 1) from 'torch.empty(8,)" in read["copied"], read


def test_a_scatter_and_a_gather_carry_never_written_halves_to_the_read_of_them(tmp_path):
    (tmp_path / "test_two.py").write_text(CASES)
    run = record_python(tmp_path, "--mode", "fresh", "--db", tmp_path / "run.db", "--json",
                        "--filter", "scatter_gather")
    cases = {c["label"]: c for c in json.loads(run.stdout)["cases"]}
    assert cases["healthy/scatter_gather_halves@2"]["verdict"] is None, run.stdout[-3000:]
    read = cases["bug/scatter_gather_all@2"]["uninitialized_read"]
    assert read["rank"] == 0 and "aten.sum" in read["name"], read
    assert "(gather #" in read["copied"] and "(scatter #" in read["copied"], read
